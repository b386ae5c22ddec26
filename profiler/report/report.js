// The HTML report's behaviour (profiler/html_report.cpp inlines this file): sortable tables,
// a tooltip for every element with data-tip, and click-to-zoom on the icicles. The charts
// themselves are static SVG written by the generator: the page reads right without scripts.
(function () {
  "use strict";

  // Tables: a click on a header sorts by that column (numbers by their data-v value).
  function sortTable(table, column, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = !th.classList.contains("sorted-desc");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.classList.remove("sorted-desc", "sorted-asc");
    });
    th.classList.add(descending ? "sorted-desc" : "sorted-asc");
    function key(row) {
      var cell = row.cells[column];
      var value = cell.getAttribute("data-v");
      var number = value === null || value === "" ? NaN : Number(value);
      return isNaN(number) ? cell.textContent : number;
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      var order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      th.addEventListener("click", function () { sortTable(table, column, th); });
    });
  });

  // Tooltips: the row behind a point, a cell or a bar.
  var tip = document.getElementById("tooltip");
  document.addEventListener("mousemove", function (event) {
    var target = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!target) { tip.style.display = "none"; return; }
    tip.textContent = target.getAttribute("data-tip");
    tip.style.display = "block";
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  });

  // Icicles: a click on a cell spreads it over the whole width (its ancestors too); a click
  // on the root (depth 0) zooms back out.
  document.querySelectorAll("svg.icicle").forEach(function (svg) {
    var width = Number(svg.getAttribute("data-width"));
    var cells = Array.prototype.slice.call(svg.querySelectorAll("g.cell"));
    function layout(from, to) {
      cells.forEach(function (cell) {
        var x0 = Number(cell.getAttribute("data-x0")), x1 = Number(cell.getAttribute("data-x1"));
        var left = Math.max(x0, from), right = Math.min(x1, to);
        var visible = right - left > 1e-9;
        cell.style.display = visible ? "" : "none";
        if (!visible) return;
        var x = (left - from) / (to - from) * width, w = (right - left) / (to - from) * width;
        var rect = cell.querySelector("rect"), text = cell.querySelector("text");
        rect.setAttribute("x", x.toFixed(1));
        rect.setAttribute("width", Math.max(0, w).toFixed(1));
        // Characters that fit at ~6.2 px each (html_report.cpp's label_fits uses the same rule).
        var label = cell.getAttribute("data-label"), fits = Math.floor((w - 6) / 6.2);
        text.setAttribute("x", (x + 3).toFixed(1));
        text.textContent = fits >= label.length ? label : fits >= 4 ? label.slice(0, fits - 1) + "…" : "";
      });
    }
    cells.forEach(function (cell) {
      cell.addEventListener("click", function () {
        if (cell.getAttribute("data-depth") === "0") layout(0, 1);
        else layout(Number(cell.getAttribute("data-x0")), Number(cell.getAttribute("data-x1")));
      });
    });
    layout(0, 1);
  });

  document.body.setAttribute("data-ready", "1");
})();
