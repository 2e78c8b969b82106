"""A picture of a random search (``sgm tune --plot``): the dev score of every evaluated point, and per
searched number where the good points lie. Needs matplotlib (the ``plot`` extra)."""
from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence


def plot_search(trials: Sequence[Mapping[str, Any]], names: Sequence[str], objective: str,
                path: str | os.PathLike, title: str = "", log_scale: Sequence[str] = ()) -> None:
    """Left: score per evaluation in search order, coloured by iteration, with the best so far.
    Right: one panel per searched number, score against its value (the best point marked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scored = [t for t in trials if t["score"] is not None and math.isfinite(t["score"])]
    columns = 1 + len(names)
    fig, axes = plt.subplots(1, columns, figsize=(4.2 * columns, 3.8), squeeze=False)
    ax = axes[0][0]
    if scored:
        order = list(range(1, len(scored) + 1))
        ax.scatter(order, [t["score"] for t in scored], c=[t["iteration"] for t in scored], cmap="viridis", s=10)
        best, running = -math.inf, []
        for t in scored:
            best = max(best, t["score"])
            running.append(best)
        ax.plot(order, running, color="tab:red", label="best so far")
        ax.legend(loc="lower right")
    ax.set_xlabel("evaluation (search order; colour: iteration)")
    ax.set_ylabel(f"dev {objective}")
    ax.set_title(title or "random search")
    ax.grid(alpha=0.3)
    top = max(scored, key=lambda t: t["score"]) if scored else None
    for ax, name in zip(axes[0][1:], names):
        ax.scatter([t["point"][name] for t in scored], [t["score"] for t in scored],
                   c=[t["iteration"] for t in scored], cmap="viridis", s=10)
        if top is not None:
            ax.axvline(top["point"][name], color="tab:red", linestyle=":")
        if name in log_scale:
            ax.set_xscale("log")
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
