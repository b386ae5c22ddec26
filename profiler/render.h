// The one renderer of blockscope's tables: named, typed columns and rows of cells, printed as
// an aligned text table with torch.profiler's dashed rules, as CSV (a header line of the
// column keys, then one line per row) or as JSON (an array of objects keyed the same way).
// The op, kernel and diff tables and the CLI's run / check / info summaries all print
// through it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace blockscope::profiler {

enum class Format { table, csv, json };
bool parse_format(const std::string& text, Format* out);

struct Column {
  std::string key;     // CSV header and JSON key: "median_ms"
  std::string title;   // text-table header: "median ms"
  bool left_aligned = false;
  // How a number prints in the text table: printf-style ("%.4f", "%.3e"); empty: shortest.
  std::string number_format;
};

// One row: a cell per column, each a string, a number or a bool (nlohmann::json values).
using Row = std::vector<nlohmann::json>;

struct Rows {
  std::vector<Column> columns;
  std::vector<Row> rows;
};

// The rows in `format`; the text table ends with its closing rule, CSV and JSON with "\n".
std::string render(const Rows& rows, Format format);
// The rows as a JSON array of objects (to embed in a larger document).
nlohmann::json rows_json(const Rows& rows);

// Lower-level pieces the profiler tables use: an aligned text table of ready-made cells
// (titles from columns[i].title), and one CSV line (cells quoted where needed).
std::string render_text_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& cells);
std::string csv_line(const std::vector<std::string>& cells);

}  // namespace blockscope::profiler
