/* Hindsight report: draw every panel and keep their x axes (time) linked. */
(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("hs-figures").textContent);
  var full = payload.range;
  var config = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]
  };
  var divs = [];
  Object.keys(payload.figures).forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    var fig = payload.figures[id];
    fig.data.forEach(function (t) {
      if (t.xd) {  /* x sent as first value + deltas (see reports.html.pack) */
        var acc = 0;
        t.x = t.xd.map(function (d) { acc += d; return acc; });
        delete t.xd;
      }
    });
    fig.layout.shapes = (fig.layout.shapes || []).concat(payload.shapes || []);
    Plotly.newPlot(el, fig.data, fig.layout, config);
    divs.push(el);
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

  document.querySelectorAll("button.zoom").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var x0 = Number(btn.getAttribute("data-x0"));
      var x1 = Number(btn.getAttribute("data-x1"));
      if (!isFinite(x0)) { return; }
      if (!isFinite(x1) || x1 <= x0) { x1 = x0 + 60000; }
      var pad = Math.max((x1 - x0) * 0.15, 30000);
      setRange([x0 - pad, x1 + pad], null);
      var tl = document.getElementById("timeline");
      if (tl) { tl.scrollIntoView({ behavior: "smooth" }); }
    });
  });
  window.hindsight = { setRange: setRange, fullRange: full };
})();
