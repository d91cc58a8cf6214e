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

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import pygal
from django.utils.safestring import SafeString, mark_safe

SVG = "{http://www.w3.org/2000/svg}"
_DROPPED_TAGS = {f"{SVG}script", f"{SVG}style", "script", "style"}
_DROPPED_CLASSES = {"tooltip-overlay", "text-overlay"}

ET.register_namespace("", "http://www.w3.org/2000/svg")


def _config(**extra: Any) -> dict[str, Any]:
    return {
        "js": [], "css": [], "disable_xml_declaration": True, "no_prefix": True,
        "explicit_size": False, "width": 720, "height": 360, "legend_at_bottom": True,
        "legend_at_bottom_columns": 2, "truncate_legend": 40, "truncate_label": 30,
        "show_minor_x_labels": True, "print_values": False, "margin": 12,
        "style": pygal.style.Style(font_family="inherit", background="transparent",
                                   plot_background="transparent"),
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


def over_time(days: Sequence[Any], series: dict[str, list[int]], label: str) -> SafeString:
    """Attributions per day by provider · model: stacked bars for a few days, a line per model
    over many (a line of one or two points says little)."""
    few = len(days) <= 14
    kind = pygal.StackedBar if few else pygal.Line
    chart = kind(**_config(x_label_rotation=30, show_dots=False, include_x_axis=True,
                           fill=False, show_minor_x_labels=few,
                           x_labels_major_count=min(len(days), 8)))
    chart.x_labels = [d.isoformat() for d in days]
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart, label)


def bars(labels: Sequence[str], series: dict[str, list[float]], label: str,
         horizontal: bool = True) -> SafeString:
    """Grouped bars: one bar per series for each label."""
    kind = pygal.HorizontalBar if horizontal else pygal.Bar
    extra = {"height": max(200, 60 + 28 * len(labels) * max(1, len(series)))} if horizontal \
        else {"x_label_rotation": 20}
    chart = kind(**_config(**extra))
    chart.x_labels = list(labels)
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart, label)
