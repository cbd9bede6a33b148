(() => {
  if (window.__alibiVizClicker) return;
  window.__alibiVizClicker = true;
  const companions = __COMPANIONS__;
  window.addEventListener("keydown", (event) => {
    const name = companions[event.key];
    if (!name || event.ctrlKey || event.altKey || event.metaKey || event.repeat) return;
    const target = event.target || document.body;
    const tag = (target.tagName || "").toLowerCase();
    const type = (target.type || "").toLowerCase();
    const paging = event.key === "PageDown" || event.key === "PageUp";
    if (target.isContentEditable || tag === "textarea") return;
    if (tag === "input" && !["number", "range", "checkbox", "radio"].includes(type)
        && !(target.getAttribute("role") === "combobox" || target.readOnly)) return;
    if (tag === "input" && type === "number" && !paging) return;
    const slider = target.getAttribute && target.getAttribute("role") === "slider";
    if ((slider || type === "range") && event.key.startsWith("Arrow")) return;
    if (tag === "button" && event.key === " ") return;  // Space presses a focused button
    const button = document.querySelector(".st-key-" + name + " button");
    if (!button) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    if (button.disabled) return;
    if (document.activeElement && document.activeElement !== document.body) {
      document.activeElement.blur();
    }
    button.click();
  }, true);
})();
