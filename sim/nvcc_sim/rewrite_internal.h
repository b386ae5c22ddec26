// Internal to nvcc-sim's rewriter: the Rewriter over the lexer's tokens, its parts in three
// files. rewrite.cpp: brackets, scopes and the emission of the rewritten text;
// rewrite_declarations.cpp: a declaration parsed (names, types, alignment), a function told from
// a variable; rewrite_constructs.cpp: what is rewritten, found (launches, __shared__, device
// variables, kernels, built-in members, device heap calls).
#pragma once

#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/nvcc_sim/lexer.h"
#include "sim/nvcc_sim/rewrite.h"

namespace blockscope::sim::nvcc {

enum class Brace { namespace_, class_, other };

// `s` inside a C++ string literal: quotes and backslashes escaped, line breaks as spaces.
std::string escape(const std::string& s);

class Rewriter {
 public:
  explicit Rewriter(const std::string& text);
  RewriteResult run();

 private:
  // ---- Token helpers ----
  std::string text(size_t i) const { return text_.substr(tokens_[i].begin, tokens_[i].end - tokens_[i].begin); }
  bool is(size_t i, const char* s) const {
    if (i >= n_) return false;
    const Token& t = tokens_[i];
    const size_t len = std::strlen(s);
    return t.end - t.begin == len && text_.compare(t.begin, len, s) == 0 && t.kind != Kind::literal;
  }
  bool ident(size_t i) const { return i < n_ && tokens_[i].kind == Kind::identifier; }
  bool adjacent(size_t a, size_t b) const { return tokens_[a].end == tokens_[b].begin; }
  std::string where(size_t i) const {
    return files_[static_cast<size_t>(tokens_[i].file)] + ":" + std::to_string(tokens_[i].line);
  }
  void error(size_t i, const std::string& what) { errors_.push_back(where(i) + ": error: " + what); }

  // The source text of tokens [a, b] on one line (whitespace runs become one space).
  std::string flat(size_t a, size_t b) const {
    std::string out;
    for (size_t i = a; i <= b && i < n_; ++i) {
      if (tokens_[i].kind == Kind::directive) continue;
      if (!out.empty() && tokens_[i].begin > tokens_[i - 1].end) out += ' ';
      out += text(i);
    }
    return out;
  }

  // ---- Brackets and scopes (rewrite.cpp) ----
  void match_brackets();
  Brace classify(size_t i, std::string* namespace_name) const;
  struct Scope {
    Brace kind;
    std::string name;  // namespaces: the name ("" anonymous, "<linkage>" for extern "C" {})
  };
  void classify_scopes();

  // ---- Declarations (rewrite_declarations.cpp) ----
  size_t declaration_start(size_t m) const;
  size_t declaration_end(size_t m) const;
  // A declaration, parsed: attributes and storage words dropped, alignment kept.
  struct Declarator {
    std::string name;
    std::string type;  // the type-id: specifiers and declarator without the name
  };
  struct Declaration {
    std::vector<Declarator> declarators;
    std::string alignment;  // from aligned(N) / alignas(N), or ""
    bool is_extern = false;
    bool is_template = false;
  };
  size_t skip_attribute(size_t i, std::string* alignment) const;
  Declaration parse_declaration(size_t start, size_t end, const char* marker) const;
  bool qualifies_function(size_t m, size_t end) const;

  // ---- Constructs (rewrite_constructs.cpp) ----
  struct Construct {
    size_t end;               // last token replaced (inclusive)
    std::string replacement;  // computed at emission for launches
    bool launch = false;
    size_t open = 0, close = 0, args_open = 0;  // launch: <<<, first token of >>>, (
  };
  size_t expression_start(size_t last) const;
  void find_launch(size_t j);
  void find_shared(size_t m);
  void find_space(size_t m, const char* kind);
  void find_kernel(size_t m);
  void mark_device_body(size_t m);
  void find_device_heap_calls();
  void find_constructs();

  // ---- Emission (rewrite.cpp) ----
  size_t newlines(size_t from, size_t to) const;
  static std::string null_pointers(std::string args);
  std::string launch_text(const Construct& c, size_t start);
  std::string emit(size_t a, size_t b, bool whole);

  const std::string& text_;
  std::vector<Token> tokens_;
  std::vector<std::string> files_;
  size_t n_ = 0;
  std::vector<size_t> match_;
  std::vector<bool> namespace_scope_;
  std::vector<std::string> qualifier_;  // "::a::b::" at a namespace-scope token ("" inside an anonymous one)
  std::map<size_t, Construct> constructs_;
  std::set<size_t> removed_;
  std::map<size_t, std::string> replaced_;  // a token's text in the output (device heap calls)
  std::vector<bool> device_;                // the token is in a __global__/__device__ function body
  std::map<size_t, std::string> after_;
  std::map<std::string, std::pair<size_t, std::string>> substitutions_;  // name → (declared at, expression)
  std::vector<std::string> errors_;
  unsigned counter_ = 0;
};

}  // namespace blockscope::sim::nvcc
