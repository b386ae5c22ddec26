// See rewrite.h. A token-level rewriter: it lexes the preprocessed text (keeping the line markers
// the preprocessor left, so every token knows its original file and line), finds the constructs
// in a first pass (launches, shared-memory declarations, device variables: each a token range),
// then copies the text through, replacing each range. A replacement never adds a line: the
// compiler's diagnostics and __LINE__-based barrier identities stay those of the original source.
//
// The lexer is lexer.cpp; the Rewriter (rewrite_internal.h) has its declarations in
// rewrite_declarations.cpp and its constructs in rewrite_constructs.cpp; here: the whole run, the
// brackets and scopes it starts from, and the emission of the text.
#include "sim/nvcc_sim/rewrite.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "sim/nvcc_sim/rewrite_internal.h"

namespace blockscope::sim::nvcc {

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

Rewriter::Rewriter(const std::string& text) : text_(text) {
  Lexed lexed = lex(text);
  tokens_ = std::move(lexed.tokens);
  files_ = std::move(lexed.files);
  n_ = tokens_.size();
}

RewriteResult Rewriter::run() {
  match_brackets();
  classify_scopes();
  find_constructs();
  RewriteResult result;
  result.text = emit(0, n_, true);
  result.errors = errors_;
  return result;
}

// ---- Brackets and scopes ----
void Rewriter::match_brackets() {
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
Brace Rewriter::classify(size_t i, std::string* namespace_name) const {
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

void Rewriter::classify_scopes() {
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

// ---- Emission ----
size_t Rewriter::newlines(size_t from, size_t to) const {
  return static_cast<size_t>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(from),
                                        text_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
}

// NULL in a launch's arguments (GCC's __null once preprocessed) as nullptr: the arguments are
// captured by their own types before the kernel is called with them, and __null's type, long,
// does not convert to the kernel's pointer parameter as the literal would (llm.c's
// classifier_fused passes NULL for an output it does not want).
std::string Rewriter::null_pointers(std::string args) {
  const std::string null = "__null";
  const auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (size_t at = args.find(null); at != std::string::npos; at = args.find(null, at + 1)) {
    const size_t end = at + null.size();
    if ((at > 0 && word(args[at - 1])) || (end < args.size() && word(args[end]))) continue;
    args.replace(at, null.size(), "nullptr");
  }
  return args;
}

std::string Rewriter::launch_text(const Construct& c, size_t start) {
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
std::string Rewriter::emit(size_t a, size_t b, bool whole) {
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

RewriteResult rewrite(const std::string& preprocessed) { return Rewriter(preprocessed).run(); }

}  // namespace blockscope::sim::nvcc
