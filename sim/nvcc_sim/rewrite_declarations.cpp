// nvcc-sim's rewriter, declarations (rewrite_internal.h): where the declaration around a marker
// starts and ends, its declarators parsed (names and type-ids, attributes and storage words
// dropped, alignment kept), and whether __device__ qualifies a function or a variable. Apart from
// rewrite_constructs.cpp, which decides what to make of them.
#include <string>
#include <vector>

#include "sim/nvcc_sim/rewrite_internal.h"

namespace blockscope::sim::nvcc {
namespace {

const std::set<std::string>& type_words() {
  static const std::set<std::string> words{"const",    "volatile", "unsigned", "signed", "int",     "long",
                                           "short",    "char",     "float",    "double", "bool",    "void",
                                           "auto",     "typename", "struct",   "class",  "union",   "enum",
                                           "__restrict__", "__restrict", "static", "extern", "inline", "constexpr",
                                           "thread_local", "mutable", "register"};
  return words;
}

}  // namespace

size_t Rewriter::declaration_start(size_t m) const {
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

size_t Rewriter::declaration_end(size_t m) const {
  for (size_t k = m; k < n_; ++k) {
    if (is(k, ";")) return k;
    if (is(k, "}")) return k - 1;
    if ((is(k, "(") || is(k, "[") || is(k, "{")) && match_[k] != SIZE_MAX) k = match_[k];
  }
  return n_ - 1;
}

// Skips an attribute starting at i (returns the index after it) or returns i.
size_t Rewriter::skip_attribute(size_t i, std::string* alignment) const {
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

Rewriter::Declaration Rewriter::parse_declaration(size_t start, size_t end, const char* marker) const {
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
bool Rewriter::qualifies_function(size_t m, size_t end) const {
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

}  // namespace blockscope::sim::nvcc
