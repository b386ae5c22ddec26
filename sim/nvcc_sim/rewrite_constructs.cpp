// nvcc-sim's rewriter, constructs (rewrite_internal.h): what it rewrites, found in the tokens
// and recorded with its replacement — launches (<<<>>>), __shared__ declarations, namespace-scope
// __device__/__constant__/__managed__ variables, kernels' launcher registrations, members named
// like a built-in variable, the device heap calls in device code. Emission (rewrite.cpp) applies
// them.
#include <string>
#include <utility>
#include <vector>

#include "sim/nvcc_sim/rewrite_internal.h"

namespace blockscope::sim::nvcc {

// The first token of the postfix expression that ends at `last` (the kernel before <<<).
size_t Rewriter::expression_start(size_t last) const {
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

void Rewriter::find_launch(size_t j) {
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

void Rewriter::find_shared(size_t m) {
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

void Rewriter::find_space(size_t m, const char* kind) {
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

// __global__ at m: the marker becomes noinline; after the body of a kernel defined at namespace
// scope that is not a template, a registration of its launcher, so cudaLaunchKernel((void*)k, …)
// can call it (a name already overloaded where the kernel is defined registers nothing:
// register_kernel's probe cannot pick one).
void Rewriter::find_kernel(size_t m) {
  // Never inlined into the launcher that calls it in every GPU thread, as a GPU's kernel is its
  // own function: fault messages then place an access in the kernel, not in the launch's line.
  replaced_[m] = "__attribute__((noinline))";
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

// The body of the function (or lambda) a __global__/__device__ marker at m qualifies: its
// tokens are device code (device_). A kernel's body starts by saying it was entered, so that
// calling it as a host function is a fault, not a run with meaningless built-in variables.
void Rewriter::mark_device_body(size_t m) {
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
      if (is(m, "__blockscope_global__")) after_[i] += " ::blockscope::sim::kernel_body_entered(__func__);";
      return;
    }
  }
}

// In device code, the heap calls go to the device heap (sim/device_heap.h):
//   malloc(n), ::malloc(n), std::malloc(n)  →  ::blockscope::sim::device_malloc(n); free alike
//   new T…                                 →  new (::blockscope::sim::device_heap) T…
//   delete p / delete[] p                  →  ::blockscope::sim::DeviceDelete{} ->* p / …Array{} ->* p
// (->* binds as tightly as the delete-expression's operand, a cast-expression, needs).
void Rewriter::find_device_heap_calls() {
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

void Rewriter::find_constructs() {
  device_.assign(n_, false);
  for (size_t i = 0; i < n_; ++i) {
    if (is(i, "__blockscope_global__") || is(i, "__blockscope_device__")) mark_device_body(i);
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

}  // namespace blockscope::sim::nvcc
