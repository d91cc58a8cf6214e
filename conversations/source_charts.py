"""The Sources pages' charts: static SVG, drawn by pygal, put in the page's HTML.

The strict CSP allows no inline script or style, and the page's stylesheet (light and dark)
colours the chart, so what pygal adds for its own interactive use is taken out of the drawing
before it is served: its ``<script>`` and ``<style>`` elements, ``style`` attributes, ids
(they would repeat when a page has two charts), comments and the tooltip layer (a script's).
What is left is shapes and text with pygal's classes (``color-N``, ``guide``, ``axis`` …),
which ``static/sources.css`` styles. Every chart has its data table beside it on the page
(``templates/sources``): the chart is what a reader looks at, the table what a screen reader
reads and what the CSV export holds.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import pygal
from django.utils.safestring import SafeString, mark_safe

SVG = "{http://www.w3.org/2000/svg}"
_DROPPED_TAGS = {f"{SVG}script", f"{SVG}style", "script", "style"}
_DROPPED_CLASSES = {"tooltip-overlay", "text-overlay"}

ET.register_namespace("", "http://www.w3.org/2000/svg")


# The sizes the stylesheet gives the chart's text (``static/sources.css``): pygal sizes the
# room for its labels from these, so a label it thought 10 px tall and the page draws at 12 px
# would run into the bars.
LABEL_PX = 12
TITLE_PX = 14


def _config(**extra: Any) -> dict[str, Any]:
    return {
        "js": [], "css": [], "disable_xml_declaration": True, "no_prefix": True,
        "explicit_size": False, "width": 720, "height": 360, "legend_at_bottom": True,
        "legend_at_bottom_columns": 2, "truncate_legend": 40, "truncate_label": 30,
        "show_minor_x_labels": True, "print_values": False, "margin": 12,
        "style": pygal.style.Style(
            font_family="inherit", background="transparent", plot_background="transparent",
            label_font_size=LABEL_PX, major_label_font_size=LABEL_PX,
            legend_font_size=LABEL_PX, value_font_size=LABEL_PX,
            value_label_font_size=LABEL_PX, title_font_size=TITLE_PX),
        **extra,
    }


def _clean(element: ET.Element) -> None:
    for child in list(element):
        tag = child.tag if isinstance(child.tag, str) else ""
        classes = set((child.get("class") or "").split())
        if not tag or tag in _DROPPED_TAGS or classes & _DROPPED_CLASSES:
            element.remove(child)  # comments (no str tag), scripts, styles, tooltips
            continue
        _clean(child)
    for name in ("style", "id"):
        element.attrib.pop(name, None)


def _svg(chart: Any, label: str) -> SafeString:
    root = chart.render_tree()
    _clean(root)
    for name in ("id", "style"):
        root.attrib.pop(name, None)
    root.set("class", "chart-svg pygal-chart")
    root.set("role", "img")
    root.set("aria-label", label)
    root.set("focusable", "false")
    # pygal's own <title> ("Pygal") would name the chart wrongly where it is shown on hover
    for title in root.findall(f"{SVG}title"):
        title.text = label
    # The text is pygal's labels and our series names, escaped by ElementTree.
    return mark_safe(ET.tostring(root, encoding="unicode"))


def _whole_ticks(values: Sequence[float], extra: dict[str, Any]) -> None:
    """At most about six ticks on the value axis (one every 0.2 crowded a narrow axis into a
    smudge), and whole ones for counts."""
    extra["max_scale"] = 6
    if values and all(float(v).is_integer() for v in values):
        step = max(1, math.ceil(max(values) / 6))
        extra["y_labels"] = list(range(0, int(max(values)) + step, step))


def over_time(days: Sequence[Any], series: dict[str, list[int]], label: str) -> SafeString:
    """Attributions per day by provider · model: stacked bars for a few days, a line per model
    over many (a line of one or two points says little)."""
    few = len(days) <= 14
    kind = pygal.StackedBar if few else pygal.Line
    rows = math.ceil(len(series) / 2)  # the legend's, two to a row
    # pygal leaves room for one legend row under rotated labels: the others were cut off.
    extra: dict[str, Any] = {"height": 360 + 18 * max(0, rows - 1),
                             "margin_bottom": 12 + 18 * max(0, rows - 1)}
    if len(series) == 1:
        extra["show_legend"] = False  # the table beside names it (pygal drew it cut off)
    totals = [sum(v) for v in zip(*series.values(), strict=True)] if few else \
        [v for values in series.values() for v in values]
    _whole_ticks(totals, extra)
    chart = kind(**_config(x_label_rotation=30, show_dots=False, include_x_axis=True,
                           fill=False, show_minor_x_labels=few,
                           x_labels_major_count=min(len(days), 8), **extra))
    chart.x_labels = [d.isoformat() for d in days]
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart, label)


def bars(labels: Sequence[str], series: dict[str, list[float]], label: str,
         horizontal: bool = True, width: int = 720) -> SafeString:
    """Grouped bars: one bar per series for each label. ``width``: the drawing's, about the
    pixels it is shown at (a narrow box shows a wide drawing scaled down, its text too)."""
    kind = pygal.HorizontalBar if horizontal else pygal.Bar
    extra: dict[str, Any] = {"width": width}
    if horizontal:
        extra["height"] = max(160, 60 + 26 * len(labels) * max(1, len(series)))
        extra["truncate_label"] = 22 if width < 600 else 30
    else:
        extra["x_label_rotation"] = 20
    if len(series) == 1:
        extra["show_legend"] = False  # one series: the heading names it
    _whole_ticks([v for values in series.values() for v in values], extra)
    chart = kind(**_config(**extra))
    chart.x_labels = list(labels)
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart, label)
