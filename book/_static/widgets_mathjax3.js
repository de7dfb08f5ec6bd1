/* ipywidgets' html-manager (embed.js) typesets widget labels through the MathJax 2 API,
 * `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`. The book ships MathJax 3, which
 * has no `Hub`, so every labelled widget raised "Cannot read properties of undefined
 * (reading 'Queue')". This shim gives whatever object is assigned to `window.MathJax`
 * (the configuration first, then MathJax 3 itself) a `Hub.Queue` that forwards to
 * MathJax 3's `typesetPromise`. */
(function () {
  "use strict";
  var hub = {
    Queue: function (command) {
      var element = Array.isArray(command) ? command[2] : undefined;
      var mj = window.MathJax;
      if (!mj || typeof mj.typesetPromise !== "function") {
        return; // MathJax 3 not loaded yet: it typesets the whole page when it starts
      }
      var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
      ready
        .then(function () {
          return mj.typesetPromise(element ? [element] : undefined);
        })
        .catch(function (err) {
          console.warn("MathJax could not typeset a widget label", err);
        });
    },
  };
  function withHub(value) {
    if (value && typeof value === "object" && !value.Hub) {
      value.Hub = hub;
    }
    return value;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () {
      return current;
    },
    set: function (value) {
      current = withHub(value);
    },
  });
})();
