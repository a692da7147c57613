// Progressive enhancement only: every page works without JavaScript.
// Copy buttons copy the text of the element named by data-copy.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(function () {
    var status = document.getElementById(button.getAttribute("data-copy") + "-status");
    if (status) status.textContent = button.getAttribute("data-copied");
  });
});

// The language switcher changes language as soon as one is chosen; its button is shown only
// without JavaScript (<noscript>), which keeps the top bar on one line at 1280 px.
document.addEventListener("change", function (event) {
  var select = event.target.closest("form.lang select");
  if (select) select.form.submit();
});
