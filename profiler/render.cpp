#include "profiler/render.h"

#include <fmt/format.h>
#include <fmt/printf.h>

#include <algorithm>

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

std::string render(const Rows& rows, Format format) {
  switch (format) {
    case Format::json: return rows_json(rows).dump(2) + "\n";
    case Format::csv: {
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
  std::vector<Column> shown;
  for (const Column& column : rows.columns)
    if (column.in_text) shown.push_back(column);
  std::vector<std::vector<std::string>> cells;
  for (const Row& row : rows.rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < rows.columns.size(); ++c) {
      const Column& column = rows.columns[c];
      if (column.in_text) line.push_back(column.text ? column.text(row) : cell_text(row[c], column, false));
    }
    cells.push_back(line);
  }
  return render_text_table(shown, cells);
}

}  // namespace blockscope::profiler
