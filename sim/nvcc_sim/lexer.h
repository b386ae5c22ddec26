// nvcc-sim's lexer: preprocessed CUDA as tokens, each knowing its original file and line (the
// line markers the preprocessor left are followed, and kept as directive tokens). Apart from the
// rewriter (rewrite.cpp), which finds the constructs it rewrites among these tokens.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace blockscope::sim::nvcc {

enum class Kind { identifier, number, literal, punct, directive, launch_open };

struct Token {
  Kind kind;
  size_t begin, end;  // [begin, end) in the text
  int line;           // in the original file
  int file;           // index into Lexed::files
};

struct Lexed {
  std::vector<Token> tokens;
  std::vector<std::string> files;  // Token::file indexes these; files[0] is "<input>"
};

Lexed lex(const std::string& text);

}  // namespace blockscope::sim::nvcc
