// roboNet dashboard: keeps an instance's page live. The server streams the
// instance's state as server-sent events ("live": JSON of the state, the
// progress and each task's status, second line and hover text); this
// script recolours the DAG and updates the header. No framework.
"use strict";
(function () {
  var dag = document.getElementById("dag");
  if (!dag || dag.dataset.terminal === "true" || !window.EventSource) {
    return;
  }
  var source = new EventSource(dag.dataset.live);
  var setClass = function (el, base, status) {
    el.setAttribute("class", base + " " + status);
  };
  source.addEventListener("live", function (e) {
    var live = JSON.parse(e.data);
    var state = document.getElementById("state");
    state.textContent = live.state;
    setClass(state, "state", live.state);
    var progress = document.getElementById("progress");
    progress.max = live.total;
    progress.value = live.done;
    document.getElementById("progress-text").textContent = live.done + "/" + live.total + (live.more ? "+" : "") + " tasks done";
    document.getElementById("eta").textContent = live.eta;
    Object.keys(live.tasks).forEach(function (name) {
      var t = live.tasks[name];
      var g = dag.querySelector('g.task[data-task="' + CSS.escape(name) + '"]');
      if (!g) {
        return;
      }
      setClass(g, "task", t.status);
      var cell = document.querySelector('tr[data-task-row="' + CSS.escape(name) + '"] .tstatus');
      if (cell) {
        cell.textContent = t.status;
        setClass(cell, "tstatus", t.status);
      }
      g.querySelector("text.label").textContent = t.label;
      g.querySelector("title").textContent = t.title;
      dag.querySelectorAll('path.edge[data-from="' + CSS.escape(name) + '"]').forEach(function (p) {
        setClass(p, "edge", t.status);
      });
    });
    if (live.error) {
      var err = document.getElementById("error");
      err.textContent = live.error;
      err.hidden = false;
    }
    if (live.controls !== dag.dataset.controls && !live.terminal &&
        (!document.activeElement || document.activeElement.tagName !== "TEXTAREA")) {
      // A task started or stopped waiting for a signal, or the instance
      // was paused or resumed: show the buttons that apply now (not while
      // someone types a signal's payload).
      source.close();
      window.location.reload();
      return;
    }
    if (live.terminal) {
      // The run is over: show the page as it is now (outputs, final times).
      source.close();
      dag.dataset.terminal = "true";
      window.location.reload();
    }
  });
  source.addEventListener("problem", function (e) {
    var err = document.getElementById("error");
    err.textContent = JSON.parse(e.data);
    err.hidden = false;
  });
})();
