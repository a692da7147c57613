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

// The wizard's license preview waits while one of the wizard's buttons is held down. Pressing
// "Create the request" takes the focus from the field just typed in: `change` fires and the preview
// would be posted and swapped in between the press and the release, moving the page under the
// pointer; the release then lands beside the button and the first click is lost (issue 46). The
// preview skipped is asked again on release (when the press did not submit the form).
var wizardPress = null;
var wizardSkipped = false;
document.addEventListener("pointerdown", function (event) {
  wizardPress = event.target.closest ? event.target.closest("#wizard button[type=submit]") : null;
});
function wizardRelease() {
  if (!wizardPress) return;
  var form = wizardPress.form;
  wizardPress = null;
  if (wizardSkipped && form && window.htmx) {
    wizardSkipped = false;
    // after the click (if any) has been dispatched: a submitting page needs no preview
    setTimeout(function () { window.htmx.trigger(form, "change"); }, 300);
  }
}
document.addEventListener("pointerup", wizardRelease);
document.addEventListener("pointercancel", wizardRelease);
document.addEventListener("htmx:beforeRequest", function (event) {
  if (wizardPress && event.target && event.target.id === "preview") {
    wizardSkipped = true;
    event.preventDefault();
  }
});
