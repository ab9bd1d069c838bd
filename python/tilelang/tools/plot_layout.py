"""Pictures of layouts (matplotlib).

A Fragment is drawn as its tile, one cell per element, labelled with the thread that holds
it ("T5", copies as "T5/37", as upstream draws them) and its register slot ("L2"), coloured by lane within the
warp. A Layout is drawn as its tile labelled with each element's position; when it knows
its element width (the swizzled shared buffers of a kernel), each cell is coloured by the
shared-memory bank (4-byte word mod 32) its first byte falls in, and labelled with it.
Tiles of rank above 2 are drawn with their leading dimensions flattened into rows.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..layout.maps import Fragment, Layout

__all__ = ["plot_layout"]

_WARP = 32
_BANKS = 32


def _formats(formats):
    if not isinstance(formats, str):
        raise TypeError(f"formats must be a string such as 'png', 'pdf,png' or 'all', got {type(formats).__name__}")
    text = formats.strip().lower()
    chosen = ["pdf", "png", "svg"] if text == "all" else [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in chosen if f not in ("pdf", "png", "svg")]
    if bad or not chosen:
        raise ValueError(f"unknown picture format(s) {bad or formats!r}: use 'pdf', 'png', 'svg', a comma-separated "
                         "list of them, or 'all'")
    return chosen


def _as_2d(array):
    """Leading dimensions flattened into rows (a rank-1 tile is one row)."""
    return array.reshape(1, -1) if array.ndim == 1 else array.reshape(-1, array.shape[-1])


def _figure(rows, cols):
    from matplotlib.figure import Figure
    cell = max(0.25, min(0.6, 40.0 / max(rows, cols)))  # inches: large tiles get smaller cells
    fig = Figure(figsize=(cell * cols + 1.2, cell * rows + 1.2))
    ax = fig.add_axes([0.6 / (cell * cols + 1.2), 0.1 / (cell * rows + 1.2),
                       cell * cols / (cell * cols + 1.2), cell * rows / (cell * rows + 1.2)])
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([])
    ax.set_yticks([])
    return fig, ax, cell * 72  # cell width in points, for font sizes


def _cells(ax, colours):
    """One coloured cell per element (an image: far cheaper than a patch each), with grid lines."""
    rows, cols = colours.shape[:2]
    ax.imshow(colours, extent=(0, cols, rows, 0), interpolation="nearest", alpha=0.6, aspect="auto")
    ax.hlines(range(rows + 1), 0, cols, colors="black", linewidth=0.3)
    ax.vlines(range(cols + 1), 0, rows, colors="black", linewidth=0.3)


def _labels(ax, rows, cols, font):
    for i in range(rows):
        ax.text(-0.2, i + 0.5, str(i), ha="right", va="center", fontsize=font, color="#555555")
    for j in range(cols):
        ax.text(j + 0.5, -0.2, str(j), ha="center", va="bottom", fontsize=font, color="#555555")


def _fragment_figure(frag: Fragment, colormap):
    import matplotlib
    shape = frag.get_input_shape()
    cols = shape[-1]
    threads = np.moveaxis(frag.threads_of(), 0, -1).reshape(-1, cols, frag.replicate_size)
    slots = _as_2d(frag.slots_of())
    rows = slots.shape[0]
    fig, ax, cell_pt = _figure(rows, cols)
    lanes = matplotlib.colormaps[colormap or "hsv"].resampled(_WARP + 1)
    font = max(2.5, cell_pt / 6)
    _cells(ax, lanes(threads[:, :, 0] % _WARP))
    for i in range(rows):
        for j in range(cols):
            owners = "T" + "/".join(str(int(t)) for t in threads[i, j])
            ax.text(j + 0.5, i + 0.5, f"{owners}\nL{int(slots[i, j])}", ha="center", va="center",
                    fontsize=font * min(1.0, 4.0 / len(owners)), linespacing=1.6)
    _labels(ax, rows, cols, font)
    title = f"{frag.name}: " if frag.name else ""
    partition = getattr(frag, "partition", None)
    ax.set_title(f"{title}{shape} over {frag.get_thread_size()} threads, {frag.local_size()} registers each"
                 + (f"\n{partition}" if partition else "") + "\nT: thread   L: register slot   colour: lane",
                 fontsize=max(6.0, font * 1.2), pad=20)
    return fig


def _layout_figure(layout: Layout, colormap):
    import matplotlib
    offsets = _as_2d(layout.offsets())
    rows, cols = offsets.shape
    fig, ax, cell_pt = _figure(rows, cols)
    font = max(2.5, cell_pt / 6)
    bits = layout.element_bits
    if bits:
        banks = (offsets * bits // 8 // 4) % _BANKS
        colours = matplotlib.colormaps[colormap or "tab20"].resampled(_BANKS)(banks)
    else:
        colours = matplotlib.colormaps[colormap or "Spectral"](offsets / max(int(offsets.max()), 1))
    _cells(ax, colours)
    for i in range(rows):
        for j in range(cols):
            offset = str(int(offsets[i, j]))
            label = f"b{int(banks[i, j])}\n{offset}" if bits else offset
            ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=font * min(1.0, 3.0 / len(offset)),
                    linespacing=1.6)
    _labels(ax, rows, cols, font)
    title = f"{layout.name}: " if layout.name else ""
    swizzle = getattr(layout, "swizzle", None)
    what = (f"{bits}-bit elements" + (f", swizzled {swizzle}" if swizzle else "")
            + "\nb: bank (4-byte word mod 32) of the element   below: its offset") if bits else "the position of each element"
    ax.set_title(f"{title}{layout.get_input_shape()}: {what}", fontsize=max(6.0, font * 1.2), pad=20)
    return fig


def figure_of(layout, colormap=None):
    """The matplotlib Figure plot_layout saves (for notebooks and tests)."""
    if isinstance(layout, Fragment):
        return _fragment_figure(layout, colormap)
    if isinstance(layout, Layout):
        return _layout_figure(layout, colormap)
    raise TypeError(f"Expected T.Layout or T.Fragment, but got {type(layout).__name__}.")


def plot_layout(layout, save_directory="./tmp", name: str = "layout", colormap: str | None = None,
                verbose: bool = False, formats: str = "pdf"):
    """Draws layout (a T.Fragment or T.Layout) and saves it as save_directory/name.<format>
    for each of formats ("pdf", "png", "svg", comma-separated, or "all"). colormap is a
    matplotlib colormap name (default: "hsv" by lane for fragments, "tab20" by bank for
    shared layouts, "Spectral" by position otherwise). With verbose, prints each element's
    mapping. Returns the paths written."""
    chosen = _formats(formats)
    fig = figure_of(layout, colormap)
    if verbose:
        _print_mapping(layout)
    directory = Path(save_directory)
    directory.mkdir(parents=True, exist_ok=True)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)
    paths = []
    for fmt in chosen:
        path = directory / f"{name}.{fmt}"
        fig.savefig(path, format=fmt, dpi=120 if fmt == "png" else None, bbox_inches="tight")
        paths.append(str(path))
        if verbose:
            print(f"Saved {fmt} format into {path}")
    return paths


def _print_mapping(layout):
    shape = layout.get_input_shape()
    for index in np.ndindex(*shape):
        if isinstance(layout, Fragment):
            reps = [[r] if layout.replicate_size > 1 else [] for r in range(layout.replicate_size)]
            owners = [layout.map_forward_thread(r + list(index))[0] for r in reps]
            print(f"{list(index)}: thread {'/'.join(map(str, owners))}, slot {layout.map_forward_index(reps[0] + list(index))[0]}")
        else:
            print(f"{list(index)} -> {layout.map_forward_index(list(index))}")
