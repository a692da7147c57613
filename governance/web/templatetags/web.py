"""Filters that turn stored codes into translated names (no logic beyond a table look-up)."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote

from django import forms, template
from django.forms import BoundField
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import dateformat
from django.utils.formats import get_format
from django.utils.html import format_html, format_html_join
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_current_timezone, is_aware
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from governance.web import labels
from governance.web.selectors.deployment import CHART_TOP

register = template.Library()


def _when_formatter() -> Callable[[Any], str]:
    """`{{ value|moment }}` (governance.core.templatetags.dates) (in the current time zone and language) for many
    rows: the format and the time zone looked up once (each look-up reads thread-local state, and
    per row would cost more than the formatting)."""
    pattern = get_format("DATETIME_FORMAT")
    zone = get_current_timezone()

    def when(value: Any) -> str:
        return dateformat.format(value.astimezone(zone) if is_aware(value) else value, pattern)

    return when


def _url_maker(name: str) -> Callable[[Any], str]:
    """code_url for many rows: the URL's parts looked up once."""
    before, after = _parts(name)
    return lambda code: f"{before}{quote(str(code), safe=_SAFE)}{after}"


@register.filter
def label(code: str, kind: str) -> str:
    """`{{ code|label:"status" }}`: the translated name of a stored code (governance.web.labels)."""
    return labels.label(kind, code)


@register.filter
def status_badge(code: str) -> SafeString:
    return format_html('<span class="badge status-{}">{}</span>', code, labels.label("status", code))


_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"
_url_parts: dict[tuple[Any, str, str], tuple[str, str]] = {}


_SAFE = RFC3986_SUBDELIMS + "/~:@"  # as reverse() quotes


def _parts(name: str) -> tuple[str, str]:
    key = (get_urlconf(), get_script_prefix(), name)
    if key not in _url_parts:
        before, _sep, after = reverse(name, args=[_PLACEHOLDER]).partition(_PLACEHOLDER)
        _url_parts[key] = (before, after)
    return _url_parts[key]


@register.filter
def code_url(code: Any, name: str) -> str:
    """The URL named `name` for one object's code, reversed once per URL name, URLconf and script
    prefix (a reverse() per table row costs more than the rest of the row)."""
    before, after = _parts(name)
    return f"{before}{quote(str(code), safe=_SAFE)}{after}"


@register.filter
def request_url(code: Any) -> str:
    return code_url(code, "web:deployment")


@register.simple_tag
def request_rows(rows: Any, caption: str, empty: str) -> SafeString:
    """A table of request rows (governance.web.selectors.dashboard.ROW_VALUES: product, model, team, status, last update), or the `empty` line.
    Written out here: the dashboard and the request list show up to 50 rows each, and a row
    rendered by the template engine costs several times more."""
    if not rows:
        return format_html('<p class="muted">{}</p>', empty)
    url, when, badges = _url_maker("web:deployment"), _when_formatter(), {}
    for r in rows:
        if r["status"] not in badges:
            badges[r["status"]] = status_badge(r["status"])
    body = format_html_join(
        "\n",
        '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
        (
            (
                url(r["code"]),
                r["product_name"],
                r["artifact__name"],
                r["team__name"],
                badges[r["status"]],
                when(r["updated_at"]),
            )
            for r in rows
        ),
    )
    headers = (_("Product"), _("Model"), _("Team"), _("Status"), _("Updated"))
    head = format_html_join("", '<th scope="col">{}</th>', ((h,) for h in headers))
    return format_html(
        '<table>\n  <caption class="visually-hidden">{}</caption>\n  <thead><tr>{}</tr></thead>\n  <tbody>{}</tbody>\n</table>',
        caption,
        head,
        body,
    )


@register.filter
def gib(value: int | float | None) -> float:
    """Bytes as GiB (the unit the charts and tables use)."""
    return (value or 0) / 1024**3


@register.simple_tag
def field(bound: BoundField) -> str:
    """A labelled form field: label, control, help text and errors, linked for screen readers
    (aria-describedby, aria-invalid). Written out here rather than through Django's form
    templates, which cost several milliseconds a field on the wizard's 40 fields."""
    widget = bound.field.widget
    control_id = bound.auto_id or f"id_{bound.html_name}"
    described = []
    help_html = ""
    if bound.help_text:
        described.append(f"{control_id}_helptext")
        help_html = format_html('<p class="help" id="{}_helptext">{}</p>', control_id, bound.help_text)
    errors_html = ""
    if bound.errors:
        described.append(f"{control_id}_errors")
        errors_html = format_html(
            '<ul class="errorlist" id="{}_errors">{}</ul>',
            control_id,
            format_html_join("", "<li>{}</li>", ((e,) for e in bound.errors)),
        )
    attrs: dict[str, Any] = {**widget.attrs}
    if bound.field.required and not isinstance(widget, forms.CheckboxInput | forms.CheckboxSelectMultiple):
        attrs["required"] = True
    if described:
        attrs["aria-describedby"] = " ".join(described)
    if bound.errors:
        attrs["aria-invalid"] = "true"
    value = bound.value()
    if isinstance(widget, forms.CheckboxSelectMultiple):
        chosen = {str(v) for v in (value or [])}
        items = format_html_join(
            "",
            '<li><label class="check" for="{0}_{1}"><input type="checkbox" name="{2}" value="{3}" id="{0}_{1}"{4}> {5}</label></li>',
            (
                (
                    control_id,
                    index,
                    bound.html_name,
                    choice,
                    mark_safe(" checked") if str(choice) in chosen else "",
                    label,
                )
                for index, (choice, label) in enumerate(bound.field.choices)  # type: ignore[attr-defined]
            ),
        )
        return format_html(
            '<fieldset class="choices"{}><legend>{}</legend><ul class="plain">{}</ul>{}{}</fieldset>',
            _attrs({"aria-describedby": attrs.get("aria-describedby")}),
            bound.label,
            items,
            help_html,
            errors_html,
        )
    if isinstance(widget, forms.CheckboxInput):
        checked = widget.check_test(value)
        control = format_html(
            '<input type="checkbox" name="{}" id="{}"{}{}>',
            bound.html_name,
            control_id,
            mark_safe(" checked") if checked else "",
            _attrs(attrs),
        )
        return format_html(
            '<div class="field"><label class="check" for="{}">{} {}</label>{}{}</div>',
            control_id,
            control,
            bound.label,
            help_html,
            errors_html,
        )
    if isinstance(widget, forms.Select):
        options = _options(bound.field.choices, "" if value is None else str(value))  # type: ignore[attr-defined]
        control = format_html(
            '<select name="{}" id="{}"{}>{}</select>', bound.html_name, control_id, _attrs(attrs), options
        )
    elif isinstance(widget, forms.Textarea):
        control = format_html(
            '<textarea name="{}" id="{}"{}>\n{}</textarea>', bound.html_name, control_id, _attrs(attrs), value or ""
        )
    else:
        input_type = getattr(widget, "input_type", "text")
        # unlocalized: never "1,000" in a number input; a password is never sent back
        value = None if isinstance(widget, forms.PasswordInput) else widget.format_value(value)
        control = format_html(
            '<input type="{}" name="{}" id="{}"{}{}>',
            input_type,
            bound.html_name,
            control_id,
            format_html(' value="{}"', value) if value not in (None, "") else "",
            _attrs(attrs),
        )
    return format_html(
        '<div class="field"><label for="{}">{}</label>{}{}{}</div>',
        control_id,
        bound.label,
        control,
        help_html,
        errors_html,
    )


def _attrs(attrs: dict[str, Any]) -> str:
    return format_html_join(
        "",
        ' {}="{}"',
        ((name, "" if value is True else value) for name, value in attrs.items() if value not in (None, False)),
    )


def _html(value: Any) -> str:
    """`value` escaped for HTML as conditional_escape does (safe strings as they are), without its
    lazy-function wrapper: per option of a long list that wrapper was most of a page's time."""
    html = getattr(value, "__html__", None)
    return html() if html is not None else escape(str(value), quote=True)


def _options(choices: Any, current: str) -> SafeString:
    """A select's <option> elements. The audit filter lists up to 500 requests: format_html per
    option took ~0.4 ms each, half the audit page's server time (bench/ui.py)."""
    return mark_safe(  # noqa: S308 (every value and label escaped by _html)
        "".join(
            f'<option value="{_html(choice)}"{" selected" if str(choice) == current else ""}>{_html(label)}</option>'
            for choice, label in choices
        )
    )


@register.simple_tag
def audit_rows(events: Any) -> SafeString:
    """The audit page's rows (50 a page): sequence number, time, actor, action, object."""
    when = _when_formatter()
    actions = labels.audit_action_names()
    rows = format_html_join(
        "\n",
        # the object id whole (a UUID cut mid-way cannot be searched for); it wraps in its cell
        '<tr><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} <code class="id">{}</code></td></tr>',
        (
            (
                e.seq,
                when(e.occurred_at),
                e.actor_name,
                actions.get(e.action, e.action),
                e.object_type,
                e.object_id,
            )
            for e in events
        ),
    )
    return rows or format_html('<tr><td colspan="5">{}</td></tr>', _("No events match."))


@register.simple_tag(takes_context=True)
def token_rows(context: Any, rows: list[dict[str, Any]]) -> SafeString:
    """The CI tokens table's rows (governance.web.selectors.ci_tokens), each with its revoke form."""
    csrf = context.get("csrf_token", "")
    when, revoke_url = _when_formatter(), _url_maker("web:token-revoke")
    return format_html_join("\n", "{}", ((_token_row(row, csrf, when, revoke_url),) for row in rows))


def _token_row(
    row: dict[str, Any], csrf: Any, when: Callable[[Any], str], revoke_url: Callable[[Any], str]
) -> SafeString:
    t = row["token"]
    name = format_html("{}", t.name)
    if t.deployment_codes:
        n = len(t.deployment_codes)
        limited = ngettext("limited to %(n)s request", "limited to %(n)s requests", n) % {"n": n}
        name = format_html('{}<br><span class="muted">{}</span>', t.name, limited)
    scopes = format_html_join(", ", "<code>{}</code>", ((s,) for s in t.scopes))
    expires = mark_safe("—")
    if t.expires_at:
        expired = format_html(' <span class="badge bad">{}</span>', _("expired")) if row["expired"] else ""
        expires = format_html("{}{}", when(t.expires_at), expired)
    used = when(t.last_used_at) if t.last_used_at else _("never")
    revoked = format_html('<span class="bad">{}</span>', when(t.revoked_at)) if t.revoked_at else "—"
    revoke = ""
    if not t.revoked_at:
        revoke = format_html(
            '<form method="post" action="{}"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
            '<button type="submit" class="danger">{} <span class="visually-hidden">{}</span></button></form>',
            revoke_url(t.code),
            csrf,
            _("Revoke"),
            t.name,
        )
    return format_html(
        '<tr class="token" data-prefix="{}" data-active="{}">\n        <td>{}</td>\n        <td>{}</td>\n'
        "        <td><code>{}…</code></td>\n        <td>{}</td>\n        <td>{}</td>\n        <td>{}</td>\n"
        "        <td>{}</td>\n        <td>{}</td>\n        <td>{}</td>\n      </tr>",
        t.prefix,
        "true" if row["active"] else "false",
        name,
        t.team.name,
        t.prefix,
        scopes,
        ", ".join(t.environments) or _("any"),
        expires,
        used,
        revoked,
        revoke,
    )


@register.simple_tag
def memory_chart_svg(chart: Any) -> SafeString:
    """The per-GPU memory chart (governance.web.selectors.memory_chart) as SVG: a stacked bar per
    GPU, up to 16 bars of four parts; coordinates are written unlocalised."""
    bars = format_html_join(
        "",
        '<g><text x="0" y="{}">{}</text>\n        {}</g>',
        (
            (
                bar["text_y"],
                bar["label"],
                format_html_join(
                    "",
                    '<rect class="{}" x="{}" y="{}" width="{}" height="{}"></rect>',
                    ((part["css"], part["x"], bar["y"], part["width"], bar["height"]) for part in bar["parts"]),
                ),
            )
            for bar in chart.bars
        ),
    )
    # Colours, strokes and fonts come from classes (app.css): the CSP refuses inline styles.
    ticks = format_html_join(
        "",
        '<line class="tick" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line><text class="tick-label" x="{0}" y="{3}"'
        ' text-anchor="middle">{4}</text>',
        ((t["x"], chart.axis_y, chart.axis_y + 4, chart.axis_y + 16, t["label"]) for t in chart.ticks),
    )
    axes = format_html(
        '<text class="axis-title" x="0" y="12">{0}</text>\n      <g transform="translate(0 {1})">{2}</g>\n'
        '      <line class="axis" x1="{3}" x2="{4}" y1="{5}" y2="{5}"></line>{6}\n'
        '      <line class="capacity" x1="{7}" x2="{7}" y1="{1}" y2="{5}"></line>\n'
        '      <text class="axis-title" x="{8}" y="{9}" text-anchor="middle">{10}</text>',
        _("GPU"),
        CHART_TOP,
        bars,
        chart.plot_left,
        chart.plot_right,
        chart.axis_y,
        ticks,
        chart.capacity_x,
        (chart.plot_left + float(chart.plot_right)) / 2,
        chart.axis_y + 34,
        _("GiB per GPU"),
    )
    return format_html(
        '<svg class="chart" role="img" aria-labelledby="chart-title" width="{0}" height="{1}" viewBox="0 0 {0} {1}">\n'
        '      <title id="chart-title">{2}</title>\n      {3}\n    </svg>',
        chart.width,
        chart.height,
        _("Memory per GPU: weights, KV cache, activations and reserve"),
        axes,
    )
