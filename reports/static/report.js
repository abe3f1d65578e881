/* Hindsight report: draw every chart, link the time axes, zoom to findings.
 * window.hindsight.plots maps each chart id to the time (performance.now(), ms since the
 * page started loading) of its first plotly_afterplot; .expected is how many charts exist. */
(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("hs-figures").textContent);
  var full = payload.range || null;
  var H = window.hindsight = { plots: {}, expected: 0, fullRange: full };
  var config = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]
  };

  function unpack(fig) {
    fig.data.forEach(function (t) {
      if (t.xd) {  /* x sent as first value + deltas (see reports.html.pack) */
        var acc = 0;
        t.x = t.xd.map(function (d) { acc += d; return acc; });
        delete t.xd;
      }
    });
    return fig;
  }

  function draw(el, fig, shapes) {
    unpack(fig);
    if (shapes) { fig.layout.shapes = (fig.layout.shapes || []).concat(shapes); }
    H.expected += 1;
    Plotly.newPlot(el, fig.data, fig.layout, config);
    el.on("plotly_afterplot", function () {
      if (!(el.id in H.plots)) { H.plots[el.id] = performance.now(); }
    });
  }

  var divs = [];
  Object.keys(payload.figures || {}).forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    draw(el, payload.figures[id], payload.shapes || []);
    divs.push(el);
  });
  Object.keys(payload.evidence || {}).forEach(function (id) {
    var el = document.getElementById(id);
    if (el) { draw(el, payload.evidence[id], null); }
  });

  var busy = 0;
  function setRange(range, except) {
    var update = range ? { "xaxis.range": range.slice(), "xaxis.autorange": false }
                       : { "xaxis.autorange": true };
    divs.forEach(function (d) {
      if (d === except) { return; }
      busy += 1;
      Promise.resolve(Plotly.relayout(d, update)).then(
        function () { busy -= 1; }, function () { busy -= 1; });
    });
  }
  function zoomTo(x0, x1) {
    if (!isFinite(x0)) { return; }
    if (!isFinite(x1) || x1 <= x0) { x1 = x0 + 60000; }
    var pad = Math.max((x1 - x0) * 0.15, 30000);
    setRange([x0 - pad, x1 + pad], null);
  }
  divs.forEach(function (d) {
    d.on("plotly_relayout", function (ev) {
      if (busy > 0) { return; }
      var r = null;
      if (ev["xaxis.range[0]"] !== undefined) { r = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]]; }
      else if (ev["xaxis.range"]) { r = ev["xaxis.range"]; }
      else if (ev["xaxis.autorange"]) { r = full; if (full) { Plotly.relayout(d, { "xaxis.range": full.slice() }); } }
      else { return; }
      setRange(r, d);
    });
  });

  /* Timeline bars: at least MIN_BAR_PX px wide at the range shown, centred on the finding's
   * window (reports.charts_findings.bar_span); hover and zoom use the real window
   * (customdata). */
  var MIN_BAR_PX = 8;
  function widenBars(el) {
    var xa = el._fullLayout && el._fullLayout.xaxis;
    if (!xa || !xa._length || !el.data) { return; }
    var min = MIN_BAR_PX * Math.abs(xa.r2l(xa.range[1]) - xa.r2l(xa.range[0])) / xa._length;
    var bases = [], widths = [], changed = false;
    el.data.forEach(function (t) {
      var b = [], w = [];
      (t.customdata || []).forEach(function (c, i) {
        var x0 = Number(c[0]), real = Math.max(Number(c[1]) - x0, 0);
        var width = Math.max(real, min), base = x0 - (width - real) / 2;
        /* tolerance: a quarter of the minimum, so the first draw keeps the server's widths */
        if (Math.abs(width - t.x[i]) > min / 4 || Math.abs(base - t.base[i]) > min / 4) { changed = true; }
        b.push(base); w.push(width);
      });
      bases.push(b); widths.push(w);
    });
    if (changed) { Plotly.restyle(el, { base: bases, x: widths }); }
  }

  var lanes = document.getElementById("p-swimlanes");
  if (lanes && lanes.on) {
    widenBars(lanes);
    lanes.on("plotly_relayout", function () { widenBars(lanes); });
    lanes.on("plotly_click", function (ev) {
      var p = ev && ev.points && ev.points[0];
      if (!p || !p.customdata) { return; }
      zoomTo(Number(p.customdata[0]), Number(p.customdata[1]));
      H.lastClicked = p.customdata[2];
    });
  }

  document.querySelectorAll("button.zoom").forEach(function (btn) {
    btn.addEventListener("click", function () {
      zoomTo(Number(btn.getAttribute("data-x0")), Number(btn.getAttribute("data-x1")));
      var target = document.getElementById("timeline") || document.getElementById("panels");
      if (target) { target.scrollIntoView({ behavior: "smooth" }); }
    });
  });
  var reset = document.getElementById("reset-zoom");
  if (reset) { reset.addEventListener("click", function () { setRange(full, null); }); }
  H.setRange = setRange;
  H.zoomTo = zoomTo;
})();
