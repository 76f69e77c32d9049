"""matplotlib's backend in kernels: Jupyter's inline backend, without IPython.

``plt.show()``, and the end of every cell, show each open figure as display data (a PNG and
the figure's repr, as ``image/png`` and ``text/plain``) and close it, so a plot reaches the
caller the way a notebook shows it instead of as Agg's "cannot be shown" warning. Drawing is
Agg's. matplotlib imports this module (``module://`` in its backend setting, which
:mod:`.pyexec` sets in a kernel as pyplot is first imported); the agent never does.
"""

import binascii
import io

from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase as FigureManager  # noqa: F401 (for matplotlib)
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas  # noqa: F401

from . import pyexec


def show(*args, **kwargs):
    """Show and close every open figure (``block`` and the rest mean nothing here)."""
    try:
        for manager in Gcf.get_all_fig_managers():
            figure = manager.canvas.figure
            png = io.BytesIO()
            figure.savefig(png, format="png", bbox_inches="tight")
            data = binascii.b2a_base64(png.getvalue(), newline=False).decode("ascii")
            pyexec.publish({"image/png": data, "text/plain": repr(figure)})
    finally:
        Gcf.destroy_all()
