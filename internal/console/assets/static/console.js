// relay console: live progress of a replay (server-sent events). The
// pages work without it; it only keeps the replay page current.
(function () {
  "use strict";
  var run = document.getElementById("run");
  if (!run || !window.EventSource) { return; }
  var set = function (id, v) { var el = document.getElementById(id); if (el) { el.textContent = String(v); } };
  var es = new EventSource(run.getAttribute("data-events"));
  var show = function (e) {
    var v = JSON.parse(e.data);
    var c = v.counts;
    set("phase", v.phase);
    set("published", c.published); set("total", c.selected);
    set("resolved", c.resolved); set("rejected", c.rejected);
    set("failedAgain", c.failedAgain); set("duplicate", c.duplicate); set("pending", c.outcomeUnknown);
    var bar = document.getElementById("bar");
    if (bar) { bar.max = Math.max(c.selected, 1); bar.value = c.published; bar.textContent = v.percent + "%"; }
    var warn = document.getElementById("warnings");
    if (warn && v.warnings && warn.children.length !== v.warnings.length) {
      warn.textContent = "";
      v.warnings.forEach(function (w) { var li = document.createElement("li"); li.textContent = w; warn.appendChild(li); });
    }
    if (v.status) {
      var note = document.getElementById("note");
      note.textContent = "";
      var s = document.createElement("strong");
      s.id = "status"; s.textContent = v.status;
      note.appendChild(s);
      note.appendChild(document.createTextNode(": " + v.note));
      if (v.status !== "done") { note.className = "warn"; }
    }
  };
  es.addEventListener("progress", show);
  es.addEventListener("end", function (e) {
    show(e);
    es.close();
    var stop = document.getElementById("stop-form");
    if (stop) { stop.remove(); }
  });
})();
