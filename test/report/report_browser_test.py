#!/usr/bin/env python3
"""The HTML report in a real browser (headless Chromium), as a user opens it.

usage: report_browser_test.py BLOCKSCOPE SOURCE_DIR WORK_DIR [--simulated]

Makes three reports — the default profile, the series attention config with its four variants,
a diff of two saved profiles (`blockscope report`) — or with --simulated (a SIM build) one
simulated-GPU profile instead (the three CPU reports are the CPU builds' run of this test: the
same report code, only the GEMM library differs, and their second run cost CI a minute), and
for each, in Chromium:
  - the page loads and its script runs (data-ready) with nothing on the console;
  - the roofline has one point per op of each variant (the ops of the `--format json` tables);
  - each icicle's top-level cells sum to the step time within 1%;
  - every op and kernel row of the JSON output is in the page's tables with the same values;
  - a full-page screenshot (WORK_DIR/<name>.png) is not blank (pixel variety).
Checks the verdicts the series teaches too: flash's point above naive's, and no roofs and no
verdict on the simulated GPU. Standard library only; every file it makes is under WORK_DIR,
the browser's profile directory removed at the end.
"""
import html.parser
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zlib

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("report_browser_test: no chromium on PATH (tools/install_deps.sh installs Debian's chromium)")


class Browser:
    def __init__(self, work):
        self.path = find_browser()
        self.profile = os.path.join(work, "chromium-profile")

    def run(self, url, *flags):
        command = [self.path, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--no-first-run", "--user-data-dir=" + self.profile, "--enable-logging=stderr", "--v=0",
                   *flags, url]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        return done.stdout, done.stderr

    def close(self):
        shutil.rmtree(self.profile, ignore_errors=True)


# ---- The page's DOM, as Chromium left it -------------------------------------------------------

class Dom(html.parser.HTMLParser):
    """The elements the checks read: roofline points, icicle cells and tables."""

    def __init__(self):
        super().__init__()
        self.body = {}
        self.points = []         # attrs of circle.point
        self.icicles = []        # (svg attrs, [cell attrs])
        self.tables = []         # (table attrs, [[td attrs + text]])
        self.no_roofs = False
        self.verdicts = []       # attrs of p.verdict
        self._table = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = a.get("class", "").split()
        if tag == "body":
            self.body = a
        elif tag == "circle" and "point" in classes:
            self.points.append(a)
        elif tag == "svg" and "icicle" in classes:
            self.icicles.append((a, []))
        elif tag == "g" and "cell" in classes and self.icicles:
            self.icicles[-1][1].append(a)
        elif tag == "text" and "no-roofs" in classes:
            self.no_roofs = True
        elif tag == "p" and "verdict" in classes:
            self.verdicts.append(a)
        elif tag == "table":
            self._table = (a, [])
            self.tables.append(self._table)
        elif tag == "tr" and self._table is not None:
            self._table[1].append([])
        elif tag == "td" and self._table is not None:
            self._cell = dict(a, text="")
            self._table[1][-1].append(self._cell)

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data


# ---- PNG: decoded with zlib to count colours ---------------------------------------------------

def png_pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(path + ": not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if depth != 8 or interlace != 0 or colour not in (2, 6):
        raise ValueError(f"{path}: PNG kind not handled (depth {depth}, colour {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows


def check_screenshot(path, name):
    if not check(os.path.exists(path), f"{name}: no screenshot written"):
        return
    width, height, bpp, rows = png_pixels(path)
    colours, inked = set(), 0
    for y in range(0, height, 4):
        row = rows[y]
        for x in range(0, width, 4):
            pixel = row[x * bpp:x * bpp + 3]
            colours.add(pixel)
            inked += pixel != b"\xff\xff\xff"
    samples = ((height + 3) // 4) * ((width + 3) // 4)
    print(f"{name}: screenshot {width}x{height}, {len(colours)} colours, {100.0 * inked / samples:.1f}% not white")
    check(len(colours) >= 40, f"{name}: screenshot has {len(colours)} colours: blank or unstyled")
    check(inked / samples >= 0.03, f"{name}: screenshot is {100.0 * inked / samples:.1f}% ink: blank")


# ---- One report --------------------------------------------------------------------------------

def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def roofline_ops(rows):
    """The op rows a roofline point stands for: ops (not regions) with a cost and a time."""
    out = []
    for r in rows:
        time = r["device_total_us"] if r["device_total_us"] > 0 else r["cpu_total_us"]
        if not r["is_region"] and (r["flops"] > 0 or r["bytes"] > 0) and time > 0:
            out.append(r["name"] + (" (" + r["path"] + ")" if r["path"] else ""))
    return sorted(out)


def check_report(browser, work, name, html_path, variants):
    """variants: per variant, {"label", "ops": rows, "kernels": rows, "step_mean_us"} to find in the page."""
    url = "file://" + os.path.abspath(html_path)
    size = os.path.getsize(html_path)
    check(size < 600 * 1024, f"{name}: the report is {size} bytes: more than a few hundred KB")
    dom_text, log = browser.run(url, "--dump-dom")
    console = [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    check(not console, f"{name}: console messages: {console}")
    dom = Dom()
    dom.feed(dom_text)
    check(dom.body.get("data-ready") == "1", f"{name}: the page's script did not finish (no data-ready)")
    check("http://" not in dom_text and "https://" not in dom_text.replace("https://ui.perfetto.dev", ""),
          f"{name}: the page refers to the network")

    for v, variant in enumerate(variants):
        label = variant["label"]
        points = sorted(p["data-op"] for p in dom.points if p["data-variant"] == str(v))
        expected = roofline_ops(variant["ops"])
        check(points == expected, f"{name}/{label}: roofline points {points}, expected one per op {expected}")

        icicle = [cells for attrs, cells in dom.icicles if attrs.get("data-variant") == str(v)]
        if check(len(icicle) == 1, f"{name}/{label}: {len(icicle)} icicles"):
            cells = icicle[0]
            step = [float(c["data-total-us"]) for c in cells if c["data-depth"] == "0"]
            top = sum(float(c["data-total-us"]) for c in cells if c["data-depth"] == "1")
            check(len(step) == 1 and math.isclose(top, step[0], rel_tol=0.01),
                  f"{name}/{label}: icicle top level sums to {top} us, the step is {step}")
            # ... and so do the areas drawn: the top-level cells' widths (fractions of the root's).
            width = sum(float(c["data-x1"]) - float(c["data-x0"]) for c in cells if c["data-depth"] == "1")
            check(math.isclose(width, 1.0, rel_tol=0.01), f"{name}/{label}: icicle top-level cells span {width} of the step")
            check(math.isclose(step[0], variant["step_mean_us"], rel_tol=0.01),
                  f"{name}/{label}: icicle step {step[0]} us, the profile's mean step {variant['step_mean_us']} us")

        for kind in ("ops", "kernels"):
            tables = [rows for attrs, rows in dom.tables
                      if attrs.get("data-variant") == str(v) and kind in attrs.get("class", "").split()]
            if not check(len(tables) == 1, f"{name}/{label}: {len(tables)} {kind} tables"):
                continue
            page_rows = [{c["data-key"]: c for c in row} for row in tables[0] if row]
            for row in variant[kind]:
                key = (row["name"], row.get("path", ""))
                found = [r for r in page_rows if (r["name"]["data-v"], r["path"]["data-v"] if "path" in r else "") == key]
                if not check(len(found) == 1, f"{name}/{label}: {kind} row {key} is in the page {len(found)} times"):
                    continue
                for column, value in row.items():
                    if column not in found[0] or value is None or isinstance(value, (list, bool)):
                        continue
                    shown = found[0][column]["data-v"]
                    page_value = float(shown) if isinstance(value, (int, float)) else shown
                    check(same(page_value, value), f"{name}/{label}: {kind} {key} {column}: page {shown}, JSON {value}")

    shot = os.path.join(work, name + ".png")
    browser.run(url, "--window-size=1280,2400", "--screenshot=" + shot)
    check_screenshot(shot, name)
    return dom


def profile_json_and_report(blockscope, work, name, args, env=None):
    html_path = os.path.join(work, name + ".html")
    done = subprocess.run([blockscope, "profile", *args, "--row-limit", "0", "--format", "json", "--report", html_path],
                          capture_output=True, text=True, env=env, timeout=900)
    if not check(done.returncode == 0, f"{name}: blockscope profile exit {done.returncode}: {done.stderr[-2000:]}"):
        return None, None
    out = json.loads(done.stdout)
    variants = []
    for v in out["variants"]:
        steps = v["ops"]["step_times_us"]
        variants.append({"label": v["label"], "ops": v["ops"]["rows"], "kernels": v["kernels"]["rows"],
                         "step_mean_us": sum(steps) / len(steps)})
    return html_path, variants


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    blockscope, source, work = sys.argv[1:4]
    simulated = "--simulated" in sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    browser = Browser(work)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        if simulated:
            simulated_report(browser, blockscope, source, work, env)
        else:
            cpu_reports(browser, blockscope, source, work, env)
    finally:
        browser.close()
    if FAILURES:
        print(f"report_browser_test: {len(FAILURES)} failure(s)")
        return 1
    print("report_browser_test: every report passed in " + browser.path)
    return 0


def cpu_reports(browser, blockscope, source, work, env):
    # 1. The default profile (the built-in config), on the CPU.
    html_path, variants = profile_json_and_report(blockscope, work, "default", ["--device", "cpu"], env)
    if html_path:
        dom = check_report(browser, work, "default", html_path, variants)
        check(all(v.get("data-kind") for v in dom.verdicts), "default: a CPU variant without a verdict")

    # 2. The series' attention lesson: four variants on one roofline, flash above naive.
    config = os.path.join(source, "configs/series/04_attention.yaml")
    html_path, variants = profile_json_and_report(
        blockscope, work, "attention", [config, "--device", "cpu", "--set", "input.seq_len=256"], env)
    if html_path:
        dom = check_report(browser, work, "attention", html_path, variants)
        check(len({p["data-variant"] for p in dom.points}) == 4, "attention: not four variants on the roofline")
        # The attention points stand in the order of the variants' own FLOP rates (the table's
        # TFLOP/s): which path is fastest depends on the GEMM library (oneDNN: fused_softmax;
        # the built-in GEMM: flash), so the order is read from the JSON, not assumed.
        rate = {p["data-op"]: float(p["data-flops-per-s"]) for p in dom.points}
        table = {f"attention ({r['path']})": r["tflops"] for v in variants for r in v["ops"]
                 if r["name"] == "attention" and r.get("tflops")}
        fastest = max(table, key=table.get)
        check(len(table) == 4 and max(rate.get(op, 0) for op in table) == rate.get(fastest),
              f"attention: the highest point is not {fastest}'s, the fastest in the table ({rate}; {table})")

    # 3. A diff from saved profiles: `blockscope report A.json B.json -o R.html`.
    saved = os.path.join(work, "mlp.json")
    config = os.path.join(source, "configs/series/03_mlp_geglu.yaml")
    done = subprocess.run([blockscope, "profile", config, "--device", "cpu", "--set", "input.seq_len=64",
                           "--save", saved], capture_output=True, text=True, env=env, timeout=900)
    check(done.returncode == 0, f"diff: profile --save exit {done.returncode}: {done.stderr[-2000:]}")
    inputs = sorted(os.path.join(work, f) for f in os.listdir(work) if f.startswith("mlp.") and f.endswith(".json"))
    inputs.remove(saved)
    inputs.insert(0, saved)
    html_path = os.path.join(work, "diff.html")
    done = subprocess.run([blockscope, "report", *inputs, "-o", html_path], capture_output=True, text=True, timeout=300)
    if check(done.returncode == 0, f"diff: blockscope report exit {done.returncode}: {done.stderr}"):
        # The rows to find in the page: the report's own data block (what `--format json`
        # prints is checked on the reports above).
        dom_variants = []
        text = open(html_path, encoding="utf-8").read()
        block = text.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
        report = json.loads(block)
        check(len(report["variants"]) == len(inputs), "diff: not one variant per saved profile")
        for v in report["variants"]:
            steps = v["step_times_us"]
            dom_variants.append({"label": v["label"], "ops": v["ops"], "kernels": v["kernels"],
                                 "step_mean_us": sum(steps) / len(steps)})
        dom = check_report(browser, work, "diff", html_path, dom_variants)
        check('id="diffs"' in text and text.count('<svg class="diff"') == len(inputs) - 1,
              "diff: no diff chart per variant after the first")



def simulated_report(browser, blockscope, source, work, env):
    # A simulated-GPU profile: no roofs, no verdict, said on the page.
    config = os.path.join(source, "configs/series/01_matmul_add_64.yaml")
    html_path, variants = profile_json_and_report(blockscope, work, "simulated", [config, "--device", "cuda"], env)
    if html_path:
        dom = check_report(browser, work, "simulated", html_path, variants)
        check(dom.no_roofs, "simulated: the roofline does not say it has no roofs")
        check(all(not v.get("data-kind") for v in dom.verdicts), "simulated: a verdict drawn from simulator times")
        check("SIMULATED GPU" in open(html_path, encoding="utf-8").read(), "simulated: the page does not say so")


if __name__ == "__main__":
    sys.exit(main())
