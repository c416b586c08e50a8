/* moe-conform report: the case table (paged, sortable, filterable), the
 * per-case details with the heatmap and histogram SVGs built on demand, and
 * the compatibility-matrix tabs. The data is the JSON blob #case-data that
 * reports/report.py embeds (strings interned in S, records as arrays in R).
 * Sets body[data-status="ready"] when everything is initialised; errors are
 * recorded by the handler installed at the top of <body>. */
(function () {
  "use strict";

  var SVGNS = "http://www.w3.org/2000/svg";

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  /* SCHEMA.md writes non-finite numbers as strings. */
  function num(v) {
    if (v === "inf") return Infinity;
    if (v === "-inf") return -Infinity;
    if (v === "nan") return NaN;
    return v;
  }

  /* Numbers as report.py prints them: 4 significant digits, exponent unpadded. */
  function fmt(v, digits) {
    digits = digits || 4;
    if (v === null || v === undefined) return "—";
    if (typeof v !== "number") return String(v);
    if (isNaN(v)) return "NaN";
    if (v === Infinity) return "∞";
    if (v === -Infinity) return "−∞";
    if (v === 0) return "0";
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
    var a = Math.abs(v), s;
    if (a < 1e-4 || a >= Math.pow(10, digits)) {
      s = v.toExponential(digits - 1);
      var parts = s.split("e");
      var mant = parts[0].indexOf(".") >= 0 ? parts[0].replace(/0+$/, "").replace(/\.$/, "") : parts[0];
      return mant + "e" + String(parseInt(parts[1], 10));
    }
    s = v.toPrecision(digits);
    if (s.indexOf("e") >= 0) return fmt(Number(s), digits);
    if (s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    return s;
  }

  function fmtIndex(ix) {
    return Array.isArray(ix) ? "[" + ix.join(", ") + "]" : String(ix);
  }

  /* ------------------------------------------------------------ data */

  var DATA = null, RECS = [], BY_KEY = {};

  function decode() {
    var el = document.getElementById("case-data");
    if (!el) return false;
    DATA = JSON.parse(el.textContent);
    var S = DATA.S, P = DATA.P, M = DATA.metrics, V = DATA.verdicts;
    RECS = DATA.R.map(function (r, i) {
      var rec = {
        i: i, case: S[r[0]], backend: S[r[1]], stage: S[r[2]], verdict: V[r[3]], vrank: r[3],
        class: S[r[4]], tolerance: S[r[5]], bound: S[r[6]], reason: S[r[7]],
        rules: r[8].map(function (x) { return S[x]; }), time_ms: num(r[9]),
        params: P[r[10]].map(function (kv) { return [S[kv[0]], num(kv[1])]; }), line: r[11],
        metrics: null, first: [], heat: null, hist: null
      };
      if (r.length > 12) {
        rec.metrics = {};
        M.forEach(function (k, j) { rec.metrics[k] = num(r[12][j]); });
        rec.first = r[13];
        if (r[14]) rec.heat = { row: S[r[14][0]], col: S[r[14][1]], block: r[14][2], q: r[14][3] };
        if (r[15]) rec.hist = { edges: r[15][0].map(num), counts: r[15][1] };
      }
      rec.key = rec.case + "|" + rec.backend + "|" + rec.stage;
      rec.text = (rec.case + " " + rec.backend + " " + rec.stage + " " + rec.verdict + " " + rec.class + " " +
                  rec.tolerance + " " + rec.reason + " " + rec.rules.join(" ")).toLowerCase();
      BY_KEY[rec.key] = rec;
      return rec;
    });
    return true;
  }

  function metric(rec, k) {
    if (k === "time_ms") return rec.time_ms;
    return rec.metrics ? rec.metrics[k] : null;
  }

  /* ----------------------------------------------------------- table */

  var state = { sort: "verdict", dir: 1, text: "", verdict: "", backend: "", stage: "", hide: false,
                page: 0, size: 50, selected: null };
  var view = [];

  /* "words or globs": every whitespace-separated term must match somewhere;
   * * and ? are wildcards, anything else is a literal substring. */
  function matcher(text) {
    var terms = text.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var res = terms.map(function (t) {
      var src = t.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
      return new RegExp(src);
    });
    return function (rec) {
      for (var i = 0; i < res.length; i++) if (!res[i].test(rec.text)) return false;
      return true;
    };
  }

  var STRING_KEYS = { case: 1, backend: 1, stage: 1, class: 1 };

  function compareBy(key) {
    if (key === "verdict") {
      return function (a, b) { return a.vrank - b.vrank; };
    }
    if (STRING_KEYS[key]) {
      return function (a, b) { return a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0; };
    }
    /* numbers; records without the metric sort last in either direction */
    return function (a, b) {
      var x = metric(a, key), y = metric(b, key);
      var nx = x === null || x === undefined || isNaN(x), ny = y === null || y === undefined || isNaN(y);
      if (nx || ny) return nx && ny ? 0 : (nx ? 1 : -1) * state.dir;
      return x < y ? -1 : x > y ? 1 : 0;
    };
  }

  function recompute() {
    var match = matcher(state.text);
    view = RECS.filter(function (r) {
      if (state.hide && (r.verdict === "pass" || r.verdict === "refused-as-expected")) return false;
      if (state.verdict && r.verdict !== state.verdict) return false;
      if (state.backend && r.backend !== state.backend) return false;
      if (state.stage && r.stage !== state.stage) return false;
      return match(r);
    });
    var cmp = compareBy(state.sort), dir = state.dir;
    /* ties keep the embedded order (case, backend, stage): a stable, explicit key */
    view.sort(function (a, b) { return dir * cmp(a, b) || a.i - b.i; });
    var pages = Math.max(1, Math.ceil(view.length / state.size));
    if (state.page >= pages) state.page = pages - 1;
  }

  function shareCell(s) {
    if (s === null || s === undefined) return "—";
    var over = !(s <= 1);
    var w = isFinite(s) ? Math.min(1, Math.max(0, s)) * 100 : 100;
    return '<span class="sharebar' + (over ? " over" : "") + '"><i style="width:' + w.toFixed(0) + '%"></i></span>' + fmt(s, 3);
  }

  function drawTable() {
    var tbody = document.querySelector("#case-table tbody");
    var start = state.page * state.size, rows = view.slice(start, start + state.size);
    var html = rows.map(function (r) {
      var m = r.metrics, tip = r.reason ? ' title="' + esc(r.reason) + '"' : "";
      return '<tr data-i="' + r.i + '" tabindex="0" class="r-' + r.verdict +
        (state.selected === r.i ? " selected" : "") + '">' +
        '<td class="case">' + esc(r.case).replace(/\./g, ".<wbr>") + "</td><td>" + esc(r.backend) + "</td><td>" + esc(r.stage) + "</td>" +
        '<td><span class="chip v-' + r.verdict + '"' + tip + ">" + esc(r.verdict) + "</span></td>" +
        "<td>" + esc(r.class || "—") + "</td>" +
        '<td class="num">' + (m ? fmt(m.max_abs) : "—") + "</td>" +
        '<td class="num">' + (m ? fmt(m.max_ulp) : "—") + "</td>" +
        '<td class="num">' + (m && r.class === "BOUNDED" ? shareCell(m.share) : "—") + "</td>" +
        '<td class="num" title="' + (m ? esc(fmt(m.mismatches) + " of " + fmt(m.n) + " elements") : "") + '">' +
        (m ? fmt(m.mismatches) : "—") + "</td>" +
        '<td class="num">' + (m ? fmt(m.class_mismatches) : "—") + "</td>" +
        '<td class="num">' + (r.time_ms === null || r.time_ms === undefined ? "—" : fmt(r.time_ms, 3) + " ms") + "</td></tr>";
    }).join("");
    tbody.innerHTML = html || '<tr><td colspan="11" class="none">No record matches the filter.</td></tr>';
    var pages = Math.max(1, Math.ceil(view.length / state.size));
    document.getElementById("p-info").textContent = view.length
      ? "rows " + (start + 1) + "–" + (start + rows.length) + " of " + view.length + " · page " + (state.page + 1) + " of " + pages
      : "no rows";
    document.getElementById("case-count").textContent = view.length === RECS.length
      ? RECS.length + " records" : view.length + " of " + RECS.length + " records";
    document.getElementById("p-first").disabled = document.getElementById("p-prev").disabled = state.page === 0;
    document.getElementById("p-next").disabled = document.getElementById("p-last").disabled = state.page >= pages - 1;
    document.querySelectorAll("#case-table th[data-key]").forEach(function (th) {
      if (th.dataset.key === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
  }

  function refresh() { recompute(); drawTable(); }

  function fillSelect(id, values) {
    var sel = document.getElementById(id);
    values.forEach(function (v) {
      var o = document.createElement("option");
      o.value = v; o.textContent = v;
      sel.appendChild(o);
    });
  }

  function initTable(h) {
    fillSelect("f-backend", DATA.backends);
    fillSelect("f-stage", DATA.stages);
    applyHash(h);
    var text = document.getElementById("f-text"), timer = null;
    text.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.text = text.value; state.page = 0; refresh(); }, 120);
    });
    [["f-verdict", "verdict"], ["f-backend", "backend"], ["f-stage", "stage"]].forEach(function (p) {
      document.getElementById(p[0]).addEventListener("change", function (e) {
        state[p[1]] = e.target.value; state.page = 0; refresh();
      });
    });
    document.getElementById("f-hide-passing").addEventListener("change", function (e) {
      state.hide = e.target.checked; state.page = 0; refresh();
    });
    document.getElementById("p-size").addEventListener("change", function (e) {
      state.size = parseInt(e.target.value, 10); state.page = 0; refresh();
    });
    var pageBy = { "p-first": function () { return 0; }, "p-prev": function () { return state.page - 1; },
                   "p-next": function () { return state.page + 1; }, "p-last": function () { return 1e9; } };
    Object.keys(pageBy).forEach(function (id) {
      document.getElementById(id).addEventListener("click", function () {
        state.page = Math.max(0, pageBy[id]()); refresh();
      });
    });
    document.querySelectorAll("#case-table th[data-key]").forEach(function (th) {
      th.addEventListener("click", function () {
        var k = th.dataset.key;
        if (state.sort === k) state.dir = -state.dir;
        else { state.sort = k; state.dir = STRING_KEYS[k] || k === "verdict" ? 1 : -1; }
        refresh();
      });
    });
    var tbody = document.querySelector("#case-table tbody");
    function pick(e) {
      var tr = e.target.closest("tr[data-i]");
      if (tr) select(parseInt(tr.dataset.i, 10), true);
    }
    tbody.addEventListener("click", pick);
    tbody.addEventListener("keydown", function (e) { if (e.key === "Enter") pick(e); });
    refresh();
  }

  /* ------------------------------------------------------- details */

  function select(i, fromUser) {
    state.selected = i;
    var rec = RECS[i];
    document.querySelectorAll("#case-table tbody tr.selected").forEach(function (tr) { tr.classList.remove("selected"); });
    var tr = document.querySelector('#case-table tbody tr[data-i="' + i + '"]');
    if (tr) tr.classList.add("selected");
    var box = document.getElementById("details");
    box.innerHTML = detailsHtml(rec);
    box.querySelectorAll("a[data-i]").forEach(function (a) {
      a.addEventListener("click", function (e) { e.preventDefault(); select(parseInt(a.dataset.i, 10), true); });
    });
    if (fromUser) {
      if (history.replaceState) history.replaceState(null, "", "#case=" + encodeURIComponent(rec.key));
      box.scrollIntoView({ block: "nearest" });
    }
  }

  function kvTable(rows) {
    return '<table class="kv"><tbody>' + rows.map(function (kv) {
      return '<tr><th scope="row">' + esc(kv[0]) + "</th><td>" + kv[1] + "</td></tr>";
    }).join("") + "</tbody></table>";
  }

  function detailsHtml(rec) {
    var h = [];
    h.push('<h3 class="dtitle">' + esc(rec.case) + "</h3>");
    h.push('<div class="chips"><span class="chip">' + esc(rec.backend) + '</span> <span class="chip">' + esc(rec.stage) +
           '</span> <span class="chip v-' + rec.verdict + '">' + esc(rec.verdict) + "</span>" +
           (rec.class ? ' <span class="chip">' + esc(rec.class) + "</span>" : "") +
           ' <span class="muted">line ' + rec.line + " of the sweep file</span></div>");
    if (rec.reason) h.push('<div class="reason v-' + rec.verdict + '">' + esc(rec.reason) + "</div>");
    if (rec.rules.length) {
      h.push("<p><b>Rules</b> (the constructor refused with these ids):</p><ul>" + rec.rules.map(function (id) {
        var r = DATA.rules[id];
        return '<li><code>' + esc(id) + "</code>" + (r ? " (" + esc(r[0]) + "): " + esc(r[1]) +
               (r[2] ? ' <span class="muted">[' + esc(r[2]) + "]</span>" : "") : "") + "</li>";
      }).join("") + "</ul>");
    }
    var left = rec.params.map(function (kv) { return [kv[0], esc(fmt(kv[1]))]; });
    var mid = [["tolerance", "<code>" + esc(rec.tolerance || "—") + "</code>"]];
    if (rec.bound) mid.push(["bound", "<code>" + esc(rec.bound) + "</code>"]);
    mid.push(["time", rec.time_ms === null || rec.time_ms === undefined ? "—" : esc(fmt(rec.time_ms, 3)) + " ms"]);
    var right = [];
    if (rec.metrics) {
      var m = rec.metrics;
      right = [["elements", fmt(m.n)], ["mismatches", fmt(m.mismatches)],
               ["NaN/Inf class mismatches", fmt(m.class_mismatches)], ["over the bound", fmt(m.bound_failures)],
               ["max |Δ|", fmt(m.max_abs)], ["max ULP", fmt(m.max_ulp)], ["share of bound", fmt(m.share)],
               ["calls", fmt(m.calls)]].map(function (kv) { return [kv[0], esc(kv[1])]; });
    }
    h.push('<div class="grid3"><div>' + kvTable(left) + "</div><div>" + kvTable(mid) + "</div><div>" +
           (right.length ? kvTable(right) : '<p class="none">No metrics (' + esc(rec.verdict) + ").</p>") + "</div></div>");
    if (rec.first && rec.first.length) {
      h.push("<h3>First mismatches</h3>");
      h.push('<table class="data first"><thead><tr><th class="num">#</th><th>index</th><th class="num">got</th>' +
             '<th class="num">want</th><th class="num">|Δ|</th><th>got (hex)</th><th>want (hex)</th></tr></thead><tbody>' +
             rec.first.map(function (f, k) {
               var g = num(f[1]), w = num(f[2]);
               return '<tr><td class="num">' + (k + 1) + '</td><td class="mono">' + esc(fmtIndex(f[0])) + '</td><td class="num">' +
                      esc(fmt(g, 8)) + '</td><td class="num">' + esc(fmt(w, 8)) + '</td><td class="num">' +
                      esc(fmt(Math.abs(g - w))) + '</td><td class="hex">' + esc(f[3]) + '</td><td class="hex">' + esc(f[4]) + "</td></tr>";
             }).join("") + "</tbody></table>");
    }
    if (rec.heat || rec.hist) {
      h.push('<div class="figs">');
      if (rec.heat) h.push("<figure><figcaption>Share of the bound used, " + esc(rec.heat.row) + " × " +
                           esc(rec.heat.col) + "</figcaption>" + heatmapSvg(rec.heat) + "</figure>");
      if (rec.hist) h.push("<figure><figcaption>Elements by share of the bound</figcaption>" + histSvg(rec.hist) + "</figure>");
      h.push("</div>");
    }
    var sib = RECS.filter(function (r) { return r.case === rec.case && r.i !== rec.i; });
    if (sib.length) {
      h.push('<p class="siblings"><b>Same case:</b> ' + sib.map(function (r) {
        return '<a href="#" data-i="' + r.i + '">' + esc(r.backend + " " + r.stage) + '</a><span class="chip v-' +
               r.verdict + '">' + esc(r.verdict) + "</span>";
      }).join(" ") + "</p>");
    }
    return h.join("");
  }

  /* Colour of a share of the bound: white through blue up to the bound,
   * red over it, dark red for +inf (a class mismatch or a zero bound). */
  var STOPS = [[0, [246, 248, 250]], [0.25, [198, 219, 239]], [0.5, [107, 174, 214]], [0.75, [33, 113, 181]], [1, [8, 48, 107]]];
  function shareColour(s) {
    if (isNaN(s)) return "#8c959f";
    if (s === Infinity) return "#6e0b0b";
    if (s > 1) return "#cf222e";
    for (var i = 1; i < STOPS.length; i++) {
      if (s <= STOPS[i][0]) {
        var a = STOPS[i - 1], b = STOPS[i], t = (s - a[0]) / (b[0] - a[0]);
        var c = a[1].map(function (x, j) { return Math.round(x + t * (b[1][j] - x)); });
        return "rgb(" + c.join(",") + ")";
      }
    }
    return "rgb(8,48,107)";
  }

  function heatmapSvg(heat) {
    var q = heat.q, rows = q.length, cols = rows ? Math.max.apply(null, q.map(function (r) { return r.length; })) : 0;
    if (!rows || !cols) return '<p class="none">empty heatmap</p>';
    var cell = Math.max(4, Math.min(36, Math.floor(Math.min(560 / cols, 440 / rows))));
    var L = 62, T = 10, w = cols * cell, hgt = rows * cell, W = L + w + 190, H = T + Math.max(hgt, 150) + 44;
    var o = ['<svg class="heatmap" xmlns="' + SVGNS + '" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '">'];
    var rowStep = Math.ceil(12 / cell), colStep = Math.ceil(28 / cell);
    for (var e = 0; e < rows; e++) {
      for (var b = 0; b < q[e].length; b++) {
        var v = q[e][b], s = v === -1 ? Infinity : v === -2 ? NaN : v / 1000;
        var tok = heat.block ? " (tokens " + b * heat.block + "–" + ((b + 1) * heat.block - 1) + ")" : "";
        o.push('<rect x="' + (L + b * cell) + '" y="' + (T + e * cell) + '" width="' + cell + '" height="' + cell +
               '" fill="' + shareColour(s) + '" stroke="#fff" stroke-width="' + (cell > 8 ? 1 : 0) + '"><title>' +
               esc(heat.row + " " + e + ", " + heat.col + " " + b + tok + ": share " + (isFinite(s) ? s.toFixed(3) : fmt(s))) +
               "</title></rect>");
      }
      if (e % rowStep === 0) o.push('<text x="' + (L - 5) + '" y="' + (T + e * cell + cell / 2 + 4) + '" text-anchor="end">' + e + "</text>");
    }
    for (var c = 0; c < cols; c += colStep) {
      o.push('<text x="' + (L + c * cell + cell / 2) + '" y="' + (T + hgt + 14) + '" text-anchor="middle">' + c + "</text>");
    }
    o.push('<text class="axis-label" x="' + (L + w / 2) + '" y="' + (T + hgt + 34) + '" text-anchor="middle">' +
           esc(heat.col + (heat.block ? " (" + heat.block + (heat.block === 1 ? " token)" : " tokens)") : "")) + "</text>");
    o.push('<text class="axis-label" transform="translate(14 ' + (T + hgt / 2) + ') rotate(-90)" text-anchor="middle">' + esc(heat.row) + "</text>");
    /* legend: the gradient 0..1 as bands, then over-bound and infinite swatches */
    var lx = L + w + 26, lh = Math.max(100, Math.min(hgt, 180)) - 40, bands = 20;
    for (var k = 0; k < bands; k++) {
      var s0 = 1 - (k + 0.5) / bands;
      o.push('<rect x="' + lx + '" y="' + (T + k * lh / bands).toFixed(1) + '" width="14" height="' + (lh / bands + 0.5).toFixed(1) +
             '" fill="' + shareColour(s0) + '"/>');
    }
    [1, 0.5, 0].forEach(function (t) {
      o.push('<text x="' + (lx + 19) + '" y="' + (T + (1 - t) * lh + 4).toFixed(1) + '">' + t + "</text>");
    });
    o.push('<rect x="' + lx + '" y="' + (T + lh + 8) + '" width="14" height="12" fill="#cf222e"/><text x="' + (lx + 19) + '" y="' + (T + lh + 18) + '">&gt; 1: over the bound</text>');
    o.push('<rect x="' + lx + '" y="' + (T + lh + 24) + '" width="14" height="12" fill="#6e0b0b"/><text x="' + (lx + 19) + '" y="' + (T + lh + 34) + '">inf: NaN/Inf class</text>');
    o.push("</svg>");
    return o.join("");
  }

  function histSvg(hist) {
    var e = hist.edges, c = hist.counts, n = c.length;
    var labels = c.map(function (_, i) {
      /* the bucket below the last edge is closed: a share of exactly 1 is within the bound */
      return i + 1 < e.length ? "[" + fmt(e[i], 3) + ", " + fmt(e[i + 1], 3) + (i + 2 == e.length ? "]" : ")")
                              : "> " + fmt(e[i], 3);
    });
    var bw = Math.max(34, Math.min(80, Math.floor(440 / Math.max(1, n)))), L = 50, T = 18, ph = 180;
    var W = L + n * bw + 20, H = T + ph + 58;
    var maxLog = Math.log10(1 + Math.max.apply(null, c.concat([1])));
    var o = ['<svg class="histogram" xmlns="' + SVGNS + '" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '">'];
    o.push('<rect class="plot-bg" x="' + L + '" y="' + T + '" width="' + n * bw + '" height="' + ph + '"/>');
    for (var i = 0; i < n; i++) {
      var hgt = c[i] > 0 ? Math.max(2, Math.log10(1 + c[i]) / maxLog * (ph - 4)) : 0;
      var over = e[i] >= 1;
      var x = L + i * bw + 5, y = T + ph - hgt;
      o.push('<rect class="bar' + (over ? " over" : "") + '" x="' + x + '" y="' + y.toFixed(1) + '" width="' + (bw - 10) +
             '" height="' + hgt.toFixed(1) + '"><title>' + esc(labels[i] + ": " + c[i] + " elements") + "</title></rect>");
      o.push('<text x="' + (x + (bw - 10) / 2) + '" y="' + (y - 4).toFixed(1) + '" text-anchor="middle">' + c[i] + "</text>");
      o.push('<text x="' + (x + (bw - 10) / 2) + '" y="' + (T + ph + 14) + '" text-anchor="middle"' +
             (over ? ' style="fill:#cf222e;font-weight:600"' : "") + ">" + esc(labels[i]) + "</text>");
    }
    o.push('<text class="axis-label" x="' + (L + n * bw / 2) + '" y="' + (T + ph + 34) + '" text-anchor="middle">share of the bound (&gt; 1: over the bound)</text>');
    o.push('<text class="axis-label" transform="translate(16 ' + (T + ph / 2) + ') rotate(-90)" text-anchor="middle">elements (log scale)</text>');
    o.push("</svg>");
    return o.join("");
  }

  /* The URL fragment can preset the view, e.g.
   *   #filter=bf16%20cpu&verdict=fail&hide=1&sort=-share   or   #case=CASE|BACKEND|STAGE
   * so a nightly mail can link straight to the rows it talks about. */
  function readHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) {
        try { out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); } catch (e) { /* ignore a bad fragment */ }
      }
    });
    return out;
  }

  function applyHash(h) {
    if (h.filter) { state.text = h.filter; document.getElementById("f-text").value = h.filter; }
    [["verdict", "f-verdict"], ["backend", "f-backend"], ["stage", "f-stage"]].forEach(function (p) {
      var sel = document.getElementById(p[1]);
      if (h[p[0]] && Array.prototype.some.call(sel.options, function (o) { return o.value === h[p[0]]; })) {
        state[p[0]] = h[p[0]]; sel.value = h[p[0]];
      }
    });
    if (h.hide === "1") { state.hide = true; document.getElementById("f-hide-passing").checked = true; }
    if (h.sort) {
      var key = h.sort.replace(/^-/, "");
      if (document.querySelector('#case-table th[data-key="' + key + '"]')) {
        state.sort = key; state.dir = h.sort.charAt(0) === "-" ? -1 : 1;
      }
    }
  }

  /* The first record to show: the one named in the URL, else the first
   * failing record (in the table's order) that has a heatmap, else the first
   * failing one. */
  function initialSelection(h) {
    if (h["case"] && BY_KEY[h["case"]]) return BY_KEY[h["case"]].i;
    var bad = view.filter(function (r) { return r.verdict === "fail" || r.verdict === "error"; });
    var withHeat = bad.filter(function (r) { return r.heat; });
    return withHeat.length ? withHeat[0].i : bad.length ? bad[0].i : null;
  }

  /* ------------------------------------------------- compat tabs */

  function initCompat() {
    var tabs = document.querySelectorAll("#compat .tab");
    if (!tabs.length) return;
    function show(id) {
      tabs.forEach(function (t) {
        var on = t.dataset.grid === id;
        t.classList.toggle("active", on);
        t.setAttribute("aria-selected", on ? "true" : "false");
      });
      document.querySelectorAll("#compat .compat-grid").forEach(function (g) { g.hidden = g.id !== id; });
    }
    tabs.forEach(function (t) { t.addEventListener("click", function () { show(t.dataset.grid); }); });
    var def = document.querySelector("#compat .tab[data-default]") || tabs[0];
    show(def.dataset.grid);
  }

  function init() {
    initCompat();
    if (decode()) {
      var h = readHash();
      initTable(h);
      var first = initialSelection(h);
      if (first !== null) select(first, false);
    }
    document.body.dataset.status = "ready";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
