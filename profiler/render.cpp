#include "profiler/render.h"

#include <fmt/format.h>
#include <fmt/printf.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/error.h"

namespace blockscope::profiler {

bool parse_format(const std::string& text, Format* out) {
  if (text == "table") *out = Format::table;
  else if (text == "csv") *out = Format::csv;
  else if (text == "json") *out = Format::json;
  else return false;
  return true;
}

namespace {

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

// Display width in code points (UTF-8 continuation bytes do not count).
size_t text_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char ch : text) width += (ch & 0xC0) != 0x80;
  return width;
}

// A cell as text: strings as they are, numbers in the column's format (CSV: shortest round
// trip), bools true/false (CSV 1/0), arrays "[1, 2, 3]", null "-" (CSV empty).
std::string cell_text(const nlohmann::json& cell, const Column& column, bool for_csv) {
  if (cell.is_string()) return cell.get<std::string>();
  if (cell.is_null()) return for_csv ? "" : "-";
  if (cell.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < cell.size(); ++i) out += (i ? ", " : "") + cell_text(cell[i], column, true);
    return out + "]";
  }
  if (cell.is_boolean()) return for_csv ? (cell.get<bool>() ? "1" : "0") : (cell.get<bool>() ? "true" : "false");
  if (cell.is_number_integer()) return std::to_string(cell.get<int64_t>());
  if (cell.is_number()) {
    const double value = cell.get<double>();
    if (for_csv || column.number_format.empty()) return fmt::format("{}", value);
    return fmt::sprintf(column.number_format, value);
  }
  return cell.dump();
}

}  // namespace

std::string csv_line(const std::vector<std::string>& cells) {
  std::string out;
  for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + csv_cell(cells[i]);
  return out + "\n";
}

std::string render_text_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& cells) {
  std::vector<size_t> widths(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    widths[c] = text_width(columns[c].title);
    for (const auto& row : cells) widths[c] = std::max(widths[c], text_width(row[c]));
  }
  const auto line = [&](const std::vector<std::string>& row, bool is_title) {
    std::string out;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c) out += "  ";
      const std::string pad(widths[c] - text_width(row[c]), ' ');
      out += columns[c].left_aligned || (is_title && c == 0) ? row[c] + pad : pad + row[c];
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string rule;
  for (size_t c = 0; c < columns.size(); ++c) rule += (c ? "  " : "") + std::string(widths[c], '-');
  rule += "\n";
  std::vector<std::string> titles;
  for (const Column& column : columns) titles.push_back(column.title);
  std::string out = rule + line(titles, true) + rule;
  for (const auto& row : cells) out += line(row, false);
  return out + rule;
}

nlohmann::json rows_json(const Rows& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& row : rows.rows) {
    nlohmann::json object = nlohmann::json::object();
    for (size_t c = 0; c < rows.columns.size(); ++c) object[rows.columns[c].key] = row[c];
    out.push_back(object);
  }
  return out;
}

std::string wrap_line(const std::string& text, size_t width) {
  if (width == 0) return text + "\n";
  std::string out, line;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && text_width(line) + 1 + text_width(word) > width) {
      out += line + "\n";
      line = "  " + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    start = end + 1;
  }
  return out + line + "\n";
}

std::string wrap_text(const std::string& text, size_t width) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += wrap_line(text.substr(start, end - start), width);
    start = end + 1;
  }
  return out;
}

size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && value > 0) return static_cast<size_t>(value);
  }
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;
}

TextLayout parse_columns(const std::string& list, size_t max_width) {
  TextLayout layout;
  layout.max_width = max_width;
  if (list.empty()) return layout;
  if (list == "all") {
    layout.max_width = 0;
    layout.hide_empty = false;
    return layout;
  }
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    layout.columns.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  layout.hide_empty = false;  // what was asked for is shown
  return layout;
}

void check_columns(const TextLayout& layout, const std::vector<Column>& known) {
  std::string valid;
  for (const Column& column : known)
    if (column.in_text) valid += (valid.empty() ? "" : ", ") + column.key;
  for (const std::string& name : layout.columns) {
    const bool found = std::any_of(known.begin(), known.end(), [&](const Column& c) {
      return c.in_text && (c.key == name || c.title == name);
    });
    if (!found) throw InputError("--columns: unknown column '" + name + "'; columns: " + valid + ", or all");
  }
}

std::string text_cell(const Row& row, size_t index, const Column& column) {
  return column.text ? column.text(row) : cell_text(row[index], column, false);
}

Rows select_columns(const Rows& rows, const TextLayout& layout) {
  if (layout.columns.empty()) return rows;
  std::vector<size_t> keep;
  for (size_t c = 0; c < rows.columns.size(); ++c)
    if (rows.columns[c].key == "variant") keep.push_back(c);  // a tidy table's first column stays
  for (const std::string& name : layout.columns) {
    for (size_t c = 0; c < rows.columns.size(); ++c) {
      if ((rows.columns[c].key == name || rows.columns[c].title == name) &&
          std::find(keep.begin(), keep.end(), c) == keep.end()) {
        keep.push_back(c);
      }
    }
  }
  // Text functions read cells by position: CSV and JSON print the raw cells, so the selected
  // columns keep their keys and lose only what they no longer can compute.
  Rows out;
  for (const size_t c : keep) {
    Column column = rows.columns[c];
    column.text = nullptr;
    out.columns.push_back(column);
  }
  for (const Row& row : rows.rows) {
    Row line;
    for (const size_t c : keep) line.push_back(row[c]);
    out.rows.push_back(line);
  }
  return out;
}

std::string render(const Rows& all, Format format, const TextLayout& layout) {
  switch (format) {
    case Format::json: return rows_json(select_columns(all, layout)).dump(2) + "\n";
    case Format::csv: {
      const Rows rows = select_columns(all, layout);
      std::vector<std::string> keys;
      for (const Column& column : rows.columns) keys.push_back(column.key);
      std::string out = csv_line(keys);
      for (const Row& row : rows.rows) {
        std::vector<std::string> cells;
        for (size_t c = 0; c < rows.columns.size(); ++c) cells.push_back(cell_text(row[c], rows.columns[c], true));
        out += csv_line(cells);
      }
      return out;
    }
    case Format::table: break;
  }
  const Rows& rows = all;
  // Every text cell first; then which columns show: asked for, or all that are not empty on
  // every row, less those dropped (in drop_order) until the table fits.
  const size_t n = rows.columns.size();
  std::vector<std::vector<std::string>> all_cells;
  for (const Row& row : rows.rows) {
    std::vector<std::string> line(n);
    for (size_t c = 0; c < n; ++c) {
      const Column& column = rows.columns[c];
      if (column.in_text) line[c] = text_cell(row, c, column);
    }
    all_cells.push_back(line);
  }
  std::vector<bool> show(n);
  std::vector<size_t> widths(n);
  for (size_t c = 0; c < n; ++c) {
    const Column& column = rows.columns[c];
    bool empty = true;
    widths[c] = text_width(column.title);
    for (const auto& line : all_cells) {
      empty = empty && (line[c].empty() || line[c] == "-");
      widths[c] = std::max(widths[c], text_width(line[c]));
    }
    const bool asked = std::find(layout.columns.begin(), layout.columns.end(), column.key) != layout.columns.end() ||
                       std::find(layout.columns.begin(), layout.columns.end(), column.title) != layout.columns.end();
    show[c] = column.in_text && (layout.columns.empty() ? !(layout.hide_empty && empty && !rows.rows.empty()) : asked);
  }
  const auto total_width = [&] {
    size_t width = 0, count = 0;
    for (size_t c = 0; c < n; ++c)
      if (show[c]) width += widths[c] + (count++ ? 2 : 0);
    return width;
  };
  std::vector<std::string> dropped;
  if (layout.max_width > 0 && layout.columns.empty()) {
    for (const std::string& key : rows.drop_order) {
      if (total_width() <= layout.max_width) break;
      for (size_t c = 0; c < n; ++c) {
        if (show[c] && rows.columns[c].key == key) {
          show[c] = false;
          dropped.push_back(rows.columns[c].title);
        }
      }
    }
  }
  std::vector<Column> shown;
  for (size_t c = 0; c < n; ++c)
    if (show[c]) shown.push_back(rows.columns[c]);
  std::vector<std::vector<std::string>> cells;
  for (const auto& line : all_cells) {
    std::vector<std::string> kept;
    for (size_t c = 0; c < n; ++c)
      if (show[c]) kept.push_back(line[c]);
    cells.push_back(kept);
  }
  std::string out = render_text_table(shown, cells);
  if (!dropped.empty()) {
    std::string names;
    for (size_t i = 0; i < dropped.size(); ++i) names += (i ? ", " : "") + dropped[i];
    out += wrap_line("(hidden to fit " + std::to_string(layout.max_width) + " columns: " + names +
                         "; " + layout.show_all + ")",
                     layout.max_width);
  }
  return out;
}

std::string format_time_us(double us) {
  if (!std::isfinite(us)) return "-";
  const double magnitude = std::fabs(us);
  if (magnitude >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = bytes;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", value) : fmt::format("{:.2f} {}", value, units[unit]);
}

std::string format_si(double value) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int unit = 0;
  while (std::fabs(value) >= 1000.0 && unit < 5) {
    value /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f}", value) : fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace blockscope::profiler
