// See lexer.h: identifiers, numbers, literals (raw ones too), punctuators, `<<<` as one token,
// and directive lines, of which the line markers move the position.
#include "sim/nvcc_sim/lexer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace blockscope::sim::nvcc {
namespace {

const char* const kPunctuators[] = {"...", "<=>", "<<=", ">>=", "->*", "::", "->", "++", "--", "<<", ">>", "<=",
                                    ">=",  "==",  "!=",  "&&",  "||",  "+=", "-=", "*=", "/=", "%=", "&=", "|=",
                                    "^=",  ".*",  "##"};

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const std::string& text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    bool line_start = true;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
        continue;
      }
      if (c == '#' && line_start) {
        out.push_back(directive());
        continue;
      }
      line_start = false;
      const size_t begin = pos_;
      Kind kind = Kind::punct;
      if (ident_start(c)) {
        while (pos_ < text_.size() && ident_char(text_[pos_])) ++pos_;
        const std::string word = text_.substr(begin, pos_ - begin);
        if (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'') && encoding_prefix(word)) {
          literal(word.back() == 'R');
          kind = Kind::literal;
        } else {
          kind = Kind::identifier;
        }
      } else if (digit(c) || (c == '.' && pos_ + 1 < text_.size() && digit(text_[pos_ + 1]))) {
        number();
        kind = Kind::number;
      } else if (c == '"' || c == '\'') {
        literal(false);
        kind = Kind::literal;
      } else if (text_.compare(pos_, 3, "<<<") == 0) {
        pos_ += 3;
        kind = Kind::launch_open;
      } else {
        pos_ += punctuator_length();
      }
      out.push_back(Token{kind, begin, pos_, line_, file_});
    }
    return out;
  }

  std::vector<std::string> files{"<input>"};

 private:
  static bool encoding_prefix(const std::string& w) {
    return w == "L" || w == "u" || w == "U" || w == "u8" || w == "R" || w == "LR" || w == "uR" || w == "UR" ||
           w == "u8R";
  }

  // A directive line: a line marker (`# 12 "file" 1 3` or `#line 12 "file"`) moves the position;
  // anything else (#pragma) is kept as it is.
  Token directive() {
    const size_t begin = pos_;
    const size_t eol = text_.find('\n', pos_);
    const size_t end = eol == std::string::npos ? text_.size() : eol;
    const std::string line = text_.substr(begin, end - begin);
    Token token{Kind::directive, begin, end, line_, file_};
    pos_ = end;
    size_t p = line.find('#') + 1;
    while (p < line.size() && line[p] == ' ') ++p;
    if (line.compare(p, 4, "line") == 0) {
      p += 4;
      while (p < line.size() && line[p] == ' ') ++p;
    }
    if (p < line.size() && digit(line[p])) {
      int number = 0;
      while (p < line.size() && digit(line[p])) number = number * 10 + (line[p++] - '0');
      const size_t open = line.find('"', p);
      if (open != std::string::npos) {
        std::string name;
        size_t q = open + 1;
        while (q < line.size() && line[q] != '"') {
          if (line[q] == '\\' && q + 1 < line.size()) ++q;
          name += line[q++];
        }
        auto it = std::find(files.begin(), files.end(), name);
        file_ = static_cast<int>(it - files.begin());
        if (it == files.end()) files.push_back(name);
      }
      line_ = number - 1;  // the newline that ends the marker brings it to `number`
    }
    return token;
  }

  void literal(bool raw) {
    const char quote = text_[pos_];
    if (raw && quote == '"') {
      const size_t paren = text_.find('(', pos_);
      const std::string delimiter = text_.substr(pos_ + 1, paren - pos_ - 1);
      const std::string close = ")" + delimiter + "\"";
      const size_t end = text_.find(close, paren);
      const size_t stop = end == std::string::npos ? text_.size() : end + close.size();
      for (size_t i = pos_; i < stop; ++i) line_ += text_[i] == '\n';
      pos_ = stop;
      return;
    }
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n') {
      if (text_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == quote) ++pos_;
  }

  void number() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (ident_char(c) || c == '.') {
        ++pos_;
      } else if ((c == '+' || c == '-') && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E' ||
                                            text_[pos_ - 1] == 'p' || text_[pos_ - 1] == 'P')) {
        ++pos_;
      } else if (c == '\'' && pos_ + 1 < text_.size() && ident_char(text_[pos_ + 1])) {
        pos_ += 2;  // digit separator
      } else {
        break;
      }
    }
  }

  size_t punctuator_length() const {
    for (const char* p : kPunctuators) {
      const size_t n = std::strlen(p);
      if (text_.compare(pos_, n, p) == 0) return n;
    }
    return 1;
  }

  const std::string& text_;
  size_t pos_ = 0;
  int line_ = 1;
  int file_ = 0;
};

}  // namespace

Lexed lex(const std::string& text) {
  Lexer lexer(text);
  Lexed lexed;
  lexed.tokens = lexer.run();
  lexed.files = lexer.files;
  return lexed;
}

}  // namespace blockscope::sim::nvcc
