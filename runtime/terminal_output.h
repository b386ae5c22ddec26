// Text blockscope prints can come from input — a config's name, a variant label, a YAML key, a
// file name, a saved profile's op names — and a control character in it would drive the
// reader's terminal (an ESC sequence) or hide what came before (a carriage return). Once
// installed, stdout and stderr write every control character as visible text: C0 controls other
// than newline and tab as \xNN, DEL as \x7f, the C1 controls (U+0080..U+009F, which some
// terminals obey) as \u00NN — the escape JSON itself uses, so a JSON document stays valid.
#pragma once

#include <ostream>
#include <string>

namespace blockscope {

// Filters std::cout and std::cerr from now on (idempotent). main() calls it first.
void install_terminal_safe_output();
// The text as those streams would print it.
std::string terminal_safe(const std::string& text);
// Standard error without the filter: for the control sequences blockscope writes on purpose
// (the progress line's carriage return and erase), never for text from input.
std::ostream& raw_stderr();

}  // namespace blockscope
