// Loaded between require.js and the widget manager (embed-amd.js) on pages with widgets; see
// nb_ipywidgets_js in _config.yml, which names the same two versions.
(function () {
  "use strict";
  // 1. The widget manager finds its fonts next to the URL require.js gives its own module. Without
  //    a path, that URL is the page's folder, and every page with a widget asks this site for
  //    @jupyter-widgets/html-manager/dist/*.woff2, which it does not have (six 404s in the console).
  var HTML_MANAGER = "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6";
  window.require.config({paths: {"@jupyter-widgets/html-manager": HTML_MANAGER}});

  // 2. The widgets typeset their labels with MathJax 2's MathJax.Hub.Queue; the book loads MathJax 3,
  //    which has no Hub (a TypeError for every label). Give every MathJax object, the configuration
  //    defined before MathJax loads and MathJax itself once it replaces it, a Hub that typesets with 3.
  var hub = {
    Queue: function () {
      Array.prototype.forEach.call(arguments, function (job) {
        if (!Array.isArray(job) || job[0] !== "Typeset") return;
        var mj = window.MathJax, el = job[2];
        var typeset = function () { return mj.typesetPromise ? mj.typesetPromise(el ? [el] : undefined) : null; };
        var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
        ready.then(function () { mj = window.MathJax; return typeset(); }).catch(function (e) {
          console.warn("MathJax could not typeset a widget label:", e);
        });
      });
    },
  };
  function withHub(mj) {
    if (mj && typeof mj === "object" && !mj.Hub) Object.defineProperty(mj, "Hub", {value: hub, configurable: true});
    return mj;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (v) { current = withHub(v); },
  });
})();
