// See rewrite.h. A token-level rewriter: it lexes the preprocessed text (keeping the line markers
// the preprocessor left, so every token knows its original file and line), finds the constructs
// in a first pass (launches, shared-memory declarations, device variables: each a token range),
// then copies the text through, replacing each range. A replacement never adds a line: the
// compiler's diagnostics and __LINE__-based barrier identities stay those of the original source.
#include "sim/nvcc_sim/rewrite.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace blockscope::sim::nvcc {
namespace {

// ---- Tokens -----------------------------------------------------------------------------------------
enum class Kind { identifier, number, literal, punct, directive, launch_open };

struct Token {
  Kind kind;
  size_t begin, end;  // [begin, end) in the text
  int line;           // in the original file
  int file;           // index into Lexer::files
};

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

// ---- The rewriter ---------------------------------------------------------------------------------------
enum class Brace { namespace_, class_, other };

const std::set<std::string>& type_words() {
  static const std::set<std::string> words{"const",    "volatile", "unsigned", "signed", "int",     "long",
                                           "short",    "char",     "float",    "double", "bool",    "void",
                                           "auto",     "typename", "struct",   "class",  "union",   "enum",
                                           "__restrict__", "__restrict", "static", "extern", "inline", "constexpr",
                                           "thread_local", "mutable", "register"};
  return words;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

class Rewriter {
 public:
  explicit Rewriter(const std::string& text) : text_(text) {
    Lexer lexer(text);
    tokens_ = lexer.run();
    files_ = lexer.files;
    n_ = tokens_.size();
  }

  RewriteResult run() {
    match_brackets();
    classify_scopes();
    find_constructs();
    RewriteResult result;
    result.text = emit(0, n_, true);
    result.errors = errors_;
    return result;
  }

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

  void match_brackets() {
    match_.assign(n_, SIZE_MAX);
    std::vector<size_t> stack;
    for (size_t i = 0; i < n_; ++i) {
      if (is(i, "(") || is(i, "[") || is(i, "{")) {
        stack.push_back(i);
      } else if (is(i, ")") || is(i, "]") || is(i, "}")) {
        if (!stack.empty()) {
          match_[i] = stack.back();
          match_[stack.back()] = i;
          stack.pop_back();
        }
      }
    }
  }

  // Tokens before `{` at i, back to the previous statement boundary: what kind of brace it opens.
  Brace classify(size_t i, std::string* namespace_name) const {
    size_t j = i;
    bool class_key = false, parens_after_key = false, names_namespace = false, linkage = false;
    size_t count = 0;
    while (j > 0) {
      const size_t k = j - 1;
      if (tokens_[k].kind == Kind::directive) {  // a line marker inside a macro's expansion
        j = k;
        continue;
      }
      if (is(k, ";") || is(k, "{") || is(k, "}")) break;
      if ((is(k, ")") || is(k, "]")) && match_[k] != SIZE_MAX) {
        if (!class_key) parens_after_key = true;
        j = match_[k];
        ++count;
        continue;
      }
      if (is(k, "namespace")) {
        names_namespace = true;
        if (namespace_name != nullptr) *namespace_name = k + 1 < i ? flat(k + 1, i - 1) : "";
        if (namespace_name != nullptr && namespace_name->rfind("inline ", 0) == 0) namespace_name->erase(0, 7);
      }
      if (is(k, "class") || is(k, "struct") || is(k, "union") || is(k, "enum")) class_key = true;
      if (is(k, "inline") && is(k + 1, "namespace")) names_namespace = true;
      if (is(k, "extern") && tokens_[k + 1].kind == Kind::literal && k + 2 == i) linkage = true;
      j = k;
      ++count;
    }
    if (names_namespace) return Brace::namespace_;
    if (linkage) {
      if (namespace_name != nullptr) *namespace_name = "<linkage>";
      return Brace::namespace_;
    }
    if (class_key && !parens_after_key && !is(i - 1, ")")) return Brace::class_;
    (void)count;
    return Brace::other;
  }

  struct Scope {
    Brace kind;
    std::string name;  // namespaces: the name ("" anonymous, "<linkage>" for extern "C" {})
  };

  void classify_scopes() {
    namespace_scope_.assign(n_, true);
    qualifier_.assign(n_, std::string());
    std::vector<Scope> stack;
    for (size_t i = 0; i < n_; ++i) {
      bool ns = true;
      bool anonymous = false;
      std::string qualifier = "::";
      for (const Scope& s : stack) {
        if (s.kind != Brace::namespace_) ns = false;
        if (s.kind == Brace::namespace_ && s.name.empty()) anonymous = true;
        if (s.kind == Brace::namespace_ && !s.name.empty() && s.name != "<linkage>") qualifier += s.name + "::";
      }
      namespace_scope_[i] = ns;
      qualifier_[i] = anonymous ? "" : qualifier;
      if (is(i, "{")) {
        std::string name;
        const Brace kind = classify(i, &name);
        stack.push_back(Scope{kind, kind == Brace::namespace_ ? name : ""});
      } else if (is(i, "}") && !stack.empty()) {
        stack.pop_back();
      }
    }
  }

  // ---- Declarations ----
  size_t declaration_start(size_t m) const {
    size_t j = m;
    while (j > 0) {
      const size_t k = j - 1;
      if (is(k, ";") || is(k, "{") || is(k, "}") || is(k, ":")) break;
      if ((is(k, ")") || is(k, "]")) && match_[k] != SIZE_MAX) {
        j = match_[k];
        continue;
      }
      j = k;
    }
    while (j < m && tokens_[j].kind == Kind::directive) ++j;
    return j;
  }

  size_t declaration_end(size_t m) const {
    for (size_t k = m; k < n_; ++k) {
      if (is(k, ";")) return k;
      if (is(k, "}")) return k - 1;
      if ((is(k, "(") || is(k, "[") || is(k, "{")) && match_[k] != SIZE_MAX) k = match_[k];
    }
    return n_ - 1;
  }

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

  // Skips an attribute starting at i (returns the index after it) or returns i.
  size_t skip_attribute(size_t i, std::string* alignment) const {
    if ((is(i, "__attribute__") || is(i, "alignas") || is(i, "__declspec")) && is(i + 1, "(") &&
        match_[i + 1] != SIZE_MAX) {
      const size_t close = match_[i + 1];
      if (is(i, "alignas")) {
        *alignment = flat(i + 2, close - 1);
      } else {
        for (size_t k = i + 1; k < close; ++k) {
          if (is(k, "aligned") && is(k + 1, "(") && match_[k + 1] != SIZE_MAX) *alignment = flat(k + 2, match_[k + 1] - 1);
        }
      }
      return close + 1;
    }
    if (is(i, "[") && is(i + 1, "[") && match_[i] != SIZE_MAX) return match_[i] + 1;
    return i;
  }

  Declaration parse_declaration(size_t start, size_t end, const char* marker) const {
    Declaration d;
    d.is_template = start >= 1 && is(start, "template");
    std::vector<size_t> kept;
    for (size_t i = start; i < end;) {
      if (tokens_[i].kind == Kind::directive) {
        ++i;
        continue;
      }
      const size_t after = skip_attribute(i, &d.alignment);
      if (after != i) {
        i = after;
        continue;
      }
      if (is(i, "extern")) d.is_extern = true;
      if (is(i, "template") && is(i + 1, "<")) {
        d.is_template = true;
        // skip the template parameter list
        int depth = 0;
        for (++i; i < end; ++i) {
          if (is(i, "<")) ++depth;
          if (is(i, ">")) --depth;
          if (is(i, ">>")) depth -= 2;
          if (depth <= 0) break;
        }
        ++i;
        continue;
      }
      if (!is(i, marker) && !is(i, "static") && !is(i, "extern") && !is(i, "__blockscope_device__") &&
          !is(i, "__blockscope_shared__") && !is(i, "__blockscope_constant__") && !is(i, "__blockscope_managed__") &&
          !is(i, "inline")) {
        kept.push_back(i);
      }
      ++i;
    }
    // Split at top-level commas.
    std::vector<std::vector<size_t>> pieces(1);
    int depth = 0;
    for (size_t idx = 0; idx < kept.size(); ++idx) {
      const size_t i = kept[idx];
      if (is(i, "(") || is(i, "[") || is(i, "{")) ++depth;
      if (is(i, ")") || is(i, "]") || is(i, "}")) --depth;
      if (is(i, "<") && idx > 0 && ident(kept[idx - 1])) ++depth;
      if (is(i, ">") && depth > 0) --depth;
      if (is(i, ",") && depth == 0) {
        pieces.emplace_back();
        continue;
      }
      pieces.back().push_back(i);
    }
    std::string specifiers;
    for (size_t p = 0; p < pieces.size(); ++p) {
      const std::vector<size_t>& piece = pieces[p];
      if (piece.empty()) continue;
      // Drop an initializer: from a top-level '=' or a trailing braced list.
      size_t stop = piece.size();
      int level = 0;
      for (size_t k = 0; k < piece.size(); ++k) {
        if (is(piece[k], "(") || is(piece[k], "[")) ++level;
        if (is(piece[k], ")") || is(piece[k], "]")) --level;
        if (level == 0 && (is(piece[k], "=") || is(piece[k], "{"))) {
          stop = k;
          break;
        }
      }
      // The name: inside a leading "(*name)" group, or the last identifier at depth 0 that ends
      // the declarator or is followed by '['.
      size_t name_at = SIZE_MAX;
      level = 0;
      for (size_t k = 0; k < stop; ++k) {
        if (is(piece[k], "(") && k + 1 < stop && (is(piece[k + 1], "*") || is(piece[k + 1], "&"))) {
          for (size_t q = k + 1; q < stop && !is(piece[q], ")"); ++q)
            if (ident(piece[q])) name_at = k + (q - k);
          break;
        }
        if (is(piece[k], "(") || is(piece[k], "[")) ++level;
        if (is(piece[k], ")") || is(piece[k], "]")) --level;
        if (level == 0 && ident(piece[k]) && !type_words().count(text(piece[k])) &&
            (k + 1 == stop || is(piece[k + 1], "[") || is(piece[k + 1], ":"))) {
          name_at = k;
        }
      }
      if (name_at == SIZE_MAX) continue;
      // Where the declarator starts (pointer operators before the name belong to it).
      size_t decl_start = name_at;
      if (p == 0) {
        while (decl_start > 0 && (is(piece[decl_start - 1], "*") || is(piece[decl_start - 1], "&") ||
                                  is(piece[decl_start - 1], "&&") || is(piece[decl_start - 1], "(") ||
                                  ((is(piece[decl_start - 1], "const") || is(piece[decl_start - 1], "volatile")) &&
                                   decl_start >= 2 && is(piece[decl_start - 2], "*")))) {
          --decl_start;
        }
        for (size_t k = 0; k < decl_start; ++k) specifiers += text(piece[k]) + " ";
      } else {
        decl_start = 0;
      }
      std::string type = specifiers;
      for (size_t k = decl_start; k < stop; ++k) {
        if (k == name_at) continue;
        type += text(piece[k]) + " ";
      }
      while (!type.empty() && type.back() == ' ') type.pop_back();
      d.declarators.push_back(Declarator{text(piece[name_at]), type});
    }
    return d;
  }

  // __device__ at m: does it qualify a function (or a lambda) rather than a variable?
  bool qualifies_function(size_t m, size_t end) const {
    std::string ignored;
    for (size_t i = m + 1; i <= end && i < n_;) {
      const size_t after = skip_attribute(i, &ignored);
      if (after != i) {
        i = after;
        continue;
      }
      if ((is(i, "decltype") || is(i, "noexcept") || is(i, "__declspec")) && is(i + 1, "(") && match_[i + 1] != SIZE_MAX) {
        i = match_[i + 1] + 1;
        continue;
      }
      if (is(i, "operator")) return true;
      if (is(i, "(")) return !(is(i + 1, "*") || is(i + 1, "&") || is(i + 1, "^"));
      if (is(i, "[") || is(i, "=") || is(i, ";") || is(i, "{") || is(i, ",")) return false;
      if (is(i, "<") && i > 0 && ident(i - 1)) {
        int depth = 0;
        for (; i <= end; ++i) {
          if (is(i, "<")) ++depth;
          if (is(i, ">")) --depth;
          if (is(i, ">>")) depth -= 2;
          if (is(i, ";")) return false;
          if (depth <= 0) break;
        }
      }
      ++i;
    }
    return false;
  }

  // ---- Constructs ----
  struct Construct {
    size_t end;               // last token replaced (inclusive)
    std::string replacement;  // computed at emission for launches
    bool launch = false;
    size_t open = 0, close = 0, args_open = 0;  // launch: <<<, first token of >>>, (
  };

  // The first token of the postfix expression that ends at `last` (the kernel before <<<).
  size_t expression_start(size_t last) const {
    size_t i = last;
    for (;;) {
      if ((is(i, ")") || is(i, "]")) && match_[i] != SIZE_MAX) {
        i = match_[i];
        if (i > 0 && (ident(i - 1) || is(i - 1, ">") || is(i - 1, ")") || is(i - 1, "]"))) {
          --i;
          continue;  // a call or subscript: its operand comes first
        }
      } else if (is(i, ">") || is(i, ">>")) {
        int depth = 0;
        size_t k = i;
        for (;; --k) {
          if (is(k, ">")) ++depth;
          if (is(k, ">>")) depth += 2;
          if (is(k, "<")) --depth;
          if ((is(k, ")") || is(k, "]")) && match_[k] != SIZE_MAX) k = match_[k];
          if (depth == 0 || k == 0) break;
        }
        if (k == 0 || !ident(k - 1)) return SIZE_MAX;
        i = k - 1;
      } else if (!ident(i)) {
        return SIZE_MAX;
      }
      size_t scope = i >= 1 ? i - 1 : SIZE_MAX;  // the "::" before this name, if any
      if (scope != SIZE_MAX && is(scope, "template")) {  // X<T>::template k<T>
        if (scope == 0 || !is(scope - 1, "::")) return SIZE_MAX;
        --scope;
      }
      if (scope != SIZE_MAX && is(scope, "::")) {
        if (scope >= 1 && (ident(scope - 1) || is(scope - 1, ">"))) {
          i = scope - 1;
          continue;
        }
        return scope;  // ::kernel
      }
      if (i >= 2 && (is(i - 1, ".") || is(i - 1, "->"))) {
        i -= 2;
        continue;
      }
      return i;
    }
  }

  void find_launch(size_t j) {
    if (j == 0 || is(j - 1, "operator")) return;
    const size_t start = expression_start(j - 1);
    if (start == SIZE_MAX) {
      error(j, "cannot tell which kernel this <<<...>>> launches (nvcc-sim understands a name, a template-id, a "
               "qualified name, a pointer or a parenthesised expression before <<<)");
      return;
    }
    size_t close = SIZE_MAX;
    for (size_t k = j + 1; k + 1 < n_; ++k) {
      if ((is(k, "(") || is(k, "[") || is(k, "{")) && match_[k] != SIZE_MAX) {
        k = match_[k];
        continue;
      }
      if (is(k, ";") || is(k, "}")) break;
      const bool three = (is(k, ">>") && is(k + 1, ">") && adjacent(k, k + 1)) ||
                         (is(k, ">") && is(k + 1, ">>") && adjacent(k, k + 1)) ||
                         (is(k, ">") && is(k + 1, ">") && is(k + 2, ">") && adjacent(k, k + 1) && adjacent(k + 1, k + 2));
      if (three) {
        close = k;
        break;
      }
    }
    if (close == SIZE_MAX) {
      error(j, "<<< without its >>>");
      return;
    }
    const size_t after = (is(close, ">") && is(close + 1, ">") && is(close + 2, ">")) ? close + 3 : close + 2;
    if (!is(after, "(") || match_[after] == SIZE_MAX) {
      error(j, "a kernel launch needs its argument list after >>>");
      return;
    }
    if (close == j + 1) {
      error(j, "<<<>>> needs at least a grid and a block size");
      return;
    }
    Construct c;
    c.end = match_[after];
    c.launch = true;
    c.open = j;
    c.close = close;
    c.args_open = after;
    constructs_[start] = c;
  }

  void find_shared(size_t m) {
    const size_t start = declaration_start(m);
    const size_t end = declaration_end(m);
    const Declaration d = parse_declaration(start, end, "__blockscope_shared__");
    if (d.declarators.empty()) {
      error(m, "cannot parse this __shared__ declaration");
      return;
    }
    const Token& t = tokens_[m];
    const std::string file = escape(files_[static_cast<size_t>(t.file)]);
    std::string out;
    for (const Declarator& v : d.declarators) {
      const std::string id = std::to_string(++counter_);
      const std::string alias = "bs_shared_t_" + id, site = "bs_shared_site_" + id;
      const std::string align = d.alignment.empty()
                                    ? "alignof(" + alias + ")"
                                    : "(alignof(" + alias + ") > (" + d.alignment + ") ? alignof(" + alias + ") : (" +
                                          d.alignment + "))";
      if (namespace_scope_[m]) {
        // Every later use of the name becomes the access expression.
        if (d.is_extern) {
          substitutions_[v.name] = {end, "(*static_cast<std::add_pointer_t<" + v.type +
                                             ">>(::blockscope::sim::dynamic_shared_memory()))"};
        } else {
          out += "using " + alias + " = " + v.type + "; static const ::blockscope::sim::SharedSite " + site + "{\"" +
                 v.name + "\", \"" + file + "\", " + std::to_string(t.line) + ", sizeof(" + alias + "), " + align + "}; ";
          substitutions_[v.name] = {end, "(*static_cast<std::add_pointer_t<" + v.type +
                                             ">>(::blockscope::sim::shared_variable(&" + qualifier_[m] + site + ")))"};
        }
        continue;
      }
      out += "using " + alias + " = " + v.type + "; ";
      if (d.is_extern) {
        out += alias + "& " + v.name + " = *static_cast<" + alias + "*>(::blockscope::sim::dynamic_shared_memory()); ";
      } else {
        out += "static const ::blockscope::sim::SharedSite " + site + "{\"" + v.name + "\", \"" + file + "\", " +
               std::to_string(t.line) + ", sizeof(" + alias + "), " + align + "}; " + alias + "& " + v.name +
               " = *static_cast<" + alias + "*>(::blockscope::sim::shared_variable(&" + site + ")); ";
      }
    }
    Construct c;
    c.end = end;
    c.replacement = out;
    constructs_[start] = c;
  }

  void find_space(size_t m, const char* kind) {
    removed_.insert(m);
    if (!namespace_scope_[m]) return;  // functions and lambdas in classes and bodies
    const size_t start = declaration_start(m);
    const size_t end = declaration_end(m);
    if (std::strcmp(kind, "device") == 0 && qualifies_function(m, end)) return;
    const Declaration d = parse_declaration(start, end, "");
    if (d.is_extern || d.is_template) return;
    std::string registration;
    for (const Declarator& v : d.declarators) {
      registration += " static ::blockscope::sim::DeviceVariable bs_device_variable_" + std::to_string(++counter_) +
                      "((void*)&" + v.name + ", sizeof(" + v.name + "), \"" + v.name +
                      "\", ::blockscope::sim::VariableKind::" + kind + ");";
    }
    if (!registration.empty() && is(end, ";")) after_[end] += registration;
  }

  // __global__ at m: the marker goes; after the body of a kernel defined at namespace scope that
  // is not a template, a registration of its launcher, so cudaLaunchKernel((void*)k, …) can
  // call it (a name already overloaded where the kernel is defined registers nothing:
  // register_kernel's probe cannot pick one).
  void find_kernel(size_t m) {
    removed_.insert(m);
    if (!namespace_scope_[m]) return;
    const size_t start = declaration_start(m);
    for (size_t i = start; i < m; ++i)
      if (is(i, "template")) return;
    std::string ignored;
    size_t open = SIZE_MAX;
    for (size_t i = m + 1; i < n_;) {
      const size_t after = skip_attribute(i, &ignored);
      if (after != i) {
        i = after;
        continue;
      }
      if (is(i, ";") || is(i, "{") || is(i, "=")) return;
      if (is(i, "(")) {
        open = i;
        break;
      }
      ++i;
    }
    // The kernel's own name before its parameters (an out-of-line ns::k definition is left alone).
    if (open == SIZE_MAX || match_[open] == SIZE_MAX || open == 0 || !ident(open - 1)) return;
    if (open >= 2 && is(open - 2, "::")) return;
    size_t body = match_[open] + 1;
    for (; body < n_; ++body) {
      if (is(body, ";") || is(body, "=")) return;  // a declaration
      if (is(body, "{")) break;
      if ((is(body, "(") || is(body, "[")) && match_[body] != SIZE_MAX) body = match_[body];
    }
    if (body >= n_ || match_[body] == SIZE_MAX) return;
    const std::string name = text(open - 1);
    after_[match_[body]] += " static const bool bs_kernel_launcher_" + std::to_string(++counter_) +
                            " = ::blockscope::sim::kernel_launch::register_kernel([](auto&& bs_probe) -> "
                            "decltype(bs_probe(" + name + ")) { return bs_probe(" + name + "); });";
  }

  // A member access (`.` or `->` at i) whose member is a built-in variable's name: the prelude's
  // macro turned `p.gridDim` into `p.(::blockscope::sim::grid_dim())`, never valid C++; the member
  // name comes back (cudaKernelNodeParams has gridDim and blockDim fields, a designated
  // initializer `.gridDim = …` is the same).
  void find_builtin_member(size_t i) {
    static const std::pair<const char*, const char*> kBuiltins[] = {
        {"thread_idx", "threadIdx"}, {"block_idx", "blockIdx"}, {"block_dim", "blockDim"}, {"grid_dim", "gridDim"}};
    if (!(is(i + 1, "(") && is(i + 2, "::") && is(i + 3, "blockscope") && is(i + 4, "::") && is(i + 5, "sim") &&
          is(i + 6, "::") && is(i + 8, "(") && is(i + 9, ")") && is(i + 10, ")"))) {
      return;
    }
    for (const auto& [function, name] : kBuiltins) {
      if (!is(i + 7, function)) continue;
      Construct c;
      c.end = i + 10;
      c.replacement = name;
      constructs_[i + 1] = c;
    }
  }

  // The body of the function (or lambda) a __global__/__device__ marker at m qualifies: its
  // tokens are device code (device_).
  void mark_device_body(size_t m) {
    if (!qualifies_function(m, n_ - 1)) return;
    for (size_t i = m + 1; i < n_; ++i) {
      if (is(i, ";") || is(i, "=")) return;  // a declaration, or = default / = delete
      if ((is(i, "(") || is(i, "[")) && match_[i] != SIZE_MAX) {
        i = match_[i];
        continue;
      }
      if (is(i, "{")) {
        if (match_[i] == SIZE_MAX) return;
        for (size_t k = i; k <= match_[i]; ++k) device_[k] = true;
        return;
      }
    }
  }

  // In device code, the heap calls go to the device heap (sim/device_heap.h):
  //   malloc(n), ::malloc(n), std::malloc(n)  →  ::blockscope::sim::device_malloc(n); free alike
  //   new T…                                 →  new (::blockscope::sim::device_heap) T…
  //   delete p / delete[] p                  →  ::blockscope::sim::DeviceDelete{} ->* p / …Array{} ->* p
  // (->* binds as tightly as the delete-expression's operand, a cast-expression, needs).
  void find_device_heap_calls() {
    for (size_t i = 0; i < n_; ++i) {
      if (!device_[i] || tokens_[i].kind != Kind::identifier) continue;
      const bool member = i > 0 && (is(i - 1, ".") || is(i - 1, "->"));
      const bool scoped = i > 0 && is(i - 1, "::");
      // The `::` (and `std`) before a name or keyword the replacement qualifies itself.
      auto drop_scope = [&]() -> bool {
        if (!scoped) return true;
        if (i >= 2 && is(i - 2, "std")) {
          removed_.insert(i - 2);
        } else if (i >= 2 && (ident(i - 2) || is(i - 2, ">"))) {
          return false;  // someone's own ns::malloc
        }
        removed_.insert(i - 1);
        return true;
      };
      if ((is(i, "malloc") || is(i, "free")) && is(i + 1, "(") && !member) {
        if (drop_scope()) replaced_[i] = is(i, "malloc") ? "::blockscope::sim::device_malloc" : "::blockscope::sim::device_free";
      } else if (is(i, "new") && !(i > 0 && is(i - 1, "operator")) && !is(i + 1, "(")) {
        replaced_[i] = "new (::blockscope::sim::device_heap)";  // after `::` too: ::new (tag) T
      } else if (is(i, "delete") && !(i > 0 && (is(i - 1, "operator") || is(i - 1, "=")))) {
        if (!drop_scope()) continue;
        if (is(i + 1, "[") && is(i + 2, "]")) {
          removed_.insert(i + 1);
          removed_.insert(i + 2);
          replaced_[i] = "::blockscope::sim::DeviceDeleteArray{} ->*";
        } else {
          replaced_[i] = "::blockscope::sim::DeviceDelete{} ->*";
        }
      }
    }
  }

  void find_constructs() {
    device_.assign(n_, false);
    for (size_t i = 0; i < n_; ++i) {
      if (is(i, "__blockscope_global__") || is(i, "__blockscope_device__")) mark_device_body(i);
      if (is(i, ".") || is(i, "->")) find_builtin_member(i);
    }
    find_device_heap_calls();
    for (size_t i = 0; i < n_; ++i) {
      if (tokens_[i].kind == Kind::launch_open) {
        find_launch(i);
      } else if (is(i, "__blockscope_global__")) {
        find_kernel(i);
      } else if (is(i, "__blockscope_shared__")) {
        find_shared(i);
      } else if (is(i, "__blockscope_device__")) {
        find_space(i, "device");
      } else if (is(i, "__blockscope_constant__")) {
        find_space(i, "constant");
      } else if (is(i, "__blockscope_managed__")) {
        find_space(i, "managed");
      }
    }
  }

  // ---- Emission ----
  size_t newlines(size_t from, size_t to) const {
    return static_cast<size_t>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(from),
                                          text_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
  }

  // NULL in a launch's arguments (GCC's __null once preprocessed) as nullptr: the arguments are
  // captured by their own types before the kernel is called with them, and __null's type, long,
  // does not convert to the kernel's pointer parameter as the literal would (llm.c's
  // classifier_fused passes NULL for an output it does not want).
  static std::string null_pointers(std::string args) {
    const std::string null = "__null";
    const auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (size_t at = args.find(null); at != std::string::npos; at = args.find(null, at + 1)) {
      const size_t end = at + null.size();
      if ((at > 0 && word(args[at - 1])) || (end < args.size() && word(args[end]))) continue;
      args.replace(at, null.size(), "nullptr");
    }
    return args;
  }

  std::string launch_text(const Construct& c, size_t start) {
    const std::string kernel = flat(start, c.open - 1);
    const Token& t = tokens_[c.open];
    const std::string config = emit(c.open + 1, c.close, false);
    std::string args = null_pointers(emit(c.args_open + 1, c.end, false));
    // An argument from a system header's macro (NULL) starts with a line marker, which must
    // begin a line: the marker after it sets the line number again, so the newline costs none.
    if (const size_t first = args.find_first_not_of(" \t"); first != std::string::npos && args[first] == '#')
      args.insert(0, "\n");
    return "::blockscope::sim::kernel_launch::launch(\"" + escape(kernel) + "\", \"" +
           escape(files_[static_cast<size_t>(t.file)]) + "\", " + std::to_string(t.line) +
           ", ::blockscope::sim::kernel_launch::config(" + config + "), [=](auto&& bs_probe) -> decltype(bs_probe(" +
           kernel + ")) { return bs_probe(" + kernel + "); }, ::blockscope::sim::kernel_launch::capture(" + args +
           "), [=](auto&... bs_args) { " + kernel + "(bs_args...); })";
  }

  // Tokens [a, b) with the constructs inside replaced. `whole`: the entire text, from offset 0.
  std::string emit(size_t a, size_t b, bool whole) {
    std::string out;
    size_t gap = whole ? 0 : (a < n_ ? tokens_[a].begin : text_.size());
    for (size_t i = a; i < b; ++i) {
      const Token& t = tokens_[i];
      out.append(text_, gap, t.begin - gap);
      auto c = constructs_.find(i);
      if (c != constructs_.end() && c->second.end < b) {
        std::string replacement = c->second.launch ? launch_text(c->second, i) : c->second.replacement;
        const size_t end = tokens_[c->second.end].end;
        size_t marker = SIZE_MAX;  // the last line marker inside the range, if any
        if (!c->second.launch) {
          for (size_t k = i; k <= c->second.end; ++k)
            if (tokens_[k].kind == Kind::directive) marker = k;
        }
        out += replacement;
        if (marker != SIZE_MAX) {
          // Macro expansions from system headers leave line markers inside a declaration: the
          // last one puts the lines after the replacement back where they were.
          out += "\n" + text(marker) + "\n";
        } else {
          const size_t lines = newlines(t.begin, end);
          const size_t used = static_cast<size_t>(std::count(replacement.begin(), replacement.end(), '\n'));
          if (lines > used) out.append(lines - used, '\n');
        }
        gap = end;
        i = c->second.end;
        continue;
      }
      gap = t.end;
      if (removed_.count(i)) continue;
      if (auto r = replaced_.find(i); r != replaced_.end()) {
        out += r->second;
      } else if (is(i, "__noinline__") && !(i > 0 && (is(i - 1, "(") || is(i - 1, ",")))) {
        out += "__attribute__((noinline))";
      } else if (t.kind == Kind::identifier && !substitutions_.empty()) {
        auto s = substitutions_.find(text(i));
        const bool member = i > 0 && (is(i - 1, ".") || is(i - 1, "->") || is(i - 1, "::"));
        if (s != substitutions_.end() && i > s->second.first && !member && !is(i + 1, "::")) {
          out += s->second.second;
        } else {
          out.append(text_, t.begin, t.end - t.begin);
        }
      } else {
        out.append(text_, t.begin, t.end - t.begin);
      }
      auto extra = after_.find(i);
      if (extra != after_.end()) out += extra->second;
    }
    if (whole) out.append(text_, gap, text_.size() - gap);
    return out;
  }

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

}  // namespace

RewriteResult rewrite(const std::string& preprocessed) { return Rewriter(preprocessed).run(); }

}  // namespace blockscope::sim::nvcc
