// The one renderer of blockscope's tables: named, typed columns and rows of cells, printed as
// an aligned text table with torch.profiler's dashed rules, as CSV (a header line of the
// column keys, then one line per row) or as JSON (an array of objects keyed the same way).
// The op, kernel and diff tables and the CLI's run / check / info summaries all print
// through it.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace blockscope::profiler {

enum class Format { table, csv, json };
bool parse_format(const std::string& text, Format* out);

// One row: a cell per column, each a string, a number, a bool, an array of numbers or null
// (unknown: empty in CSV, null in JSON, "-" in the text table).
using Row = std::vector<nlohmann::json>;

struct Column {
  Column(std::string key, std::string title, bool left_aligned = false, std::string number_format = "",
         std::function<std::string(const Row& row)> text = nullptr, bool in_text = true)
      : key(std::move(key)),
        title(std::move(title)),
        left_aligned(left_aligned),
        number_format(std::move(number_format)),
        text(std::move(text)),
        in_text(in_text) {}

  std::string key;     // CSV header and JSON key: "median_ms"
  std::string title;   // text-table header: "median ms"
  bool left_aligned = false;
  // How a number prints in the text table: printf-style ("%.4f", "%.3e"); empty: shortest.
  std::string number_format;
  // The text table's cell when it is not the cell itself ("1.234 ms", "12.5%"); gets the row.
  std::function<std::string(const Row& row)> text;
  bool in_text;  // false: CSV and JSON only
};

struct Rows {
  std::vector<Column> columns;
  std::vector<Row> rows;
  // Column keys the text table drops first, in order, when it is wider than the layout allows.
  std::vector<std::string> drop_order;
};

// How the text table is laid out (CSV and JSON always hold every column).
struct TextLayout {
  size_t max_width = 0;              // 0: no limit (the CLI sets COLUMNS or the terminal's width)
  std::vector<std::string> columns;  // keys or titles to show, in table order; empty: all that fit
  bool hide_empty = true;            // drop columns that are empty ("" or "-") on every row
  // How the reader gets the dropped columns back, said under the table (commands without
  // --columns: a wider terminal).
  std::string show_all = "--columns all shows them";
};
// The width to fit: $COLUMNS when set, else the terminal's when stdout is one, else 0 (none).
size_t terminal_width();
// `text` (one line, no newline) broken at spaces into lines of at most `width` code points
// (a longer word stays whole), continuation lines indented by two spaces; each line ends in a
// newline. Width 0: the text as one line.
std::string wrap_line(const std::string& text, size_t width);
// Every line of `text` (newline-terminated lines) through wrap_line.
std::string wrap_text(const std::string& text, size_t width);
// "name,path,self_device_us" -> layout.columns; "all" -> every column, unfitted, empties kept.
TextLayout parse_columns(const std::string& list, size_t max_width);
// An InputError naming --columns for a name in layout.columns that is none of `known`'s keys
// or titles.
void check_columns(const TextLayout& layout, const std::vector<Column>& known);

// The rows in `format`; the text table ends with its closing rule (and, when columns were
// dropped to fit, a line naming them), CSV and JSON with "\n". `layout.columns` (--columns)
// picks the columns of every format (CSV and JSON: those, in that order, after a "variant"
// column when there is one); the width applies to the text table only.
std::string render(const Rows& rows, Format format, const TextLayout& layout = {});
// Cell `index` of `row` as the text table prints it (the column's text function, its number
// format, "-" for null): the HTML report shows the same strings.
std::string text_cell(const Row& row, size_t index, const Column& column);
// Only the columns `layout.columns` names (keys or titles), in its order, after a "variant"
// column when there is one; all of them when it names none.
Rows select_columns(const Rows& rows, const TextLayout& layout);
// The rows as a JSON array of objects (to embed in a larger document).
nlohmann::json rows_json(const Rows& rows);

// Lower-level pieces: an aligned text table of ready-made cells (titles from columns[i].title;
// widths in code points, so "→" is one column), and one CSV line (cells quoted where needed).
// Units as the text tables print them. Times as torch prints them: "812.000us", "1.955ms",
// "2.301s" ("-" when not finite); bytes with binary units: "12.00 MiB"; large counts with SI
// units: "4.29 G".
std::string format_time_us(double us);
std::string format_bytes(double bytes);
std::string format_si(double value);

std::string render_text_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& cells);
std::string csv_line(const std::vector<std::string>& cells);

}  // namespace blockscope::profiler
