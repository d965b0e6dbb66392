"""Every label of every diagram is legible when the diagram is shown at its drawn size.

On a phone a diagram is shown at the width of the text (about 370 CSS px at 420 px), where its labels
are 3-6 px tall; a tap opens it at its drawn size (assets/llmlab-figures.js), one CSS px per 0.75 pt.
This test holds every label there at 9 CSS px or more: 6.75 pt.
"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from script_loader import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "figures"
sys.path.insert(0, str(FIGURES))
SMALLEST_PX = 9
PX_PER_PT = 4 / 3          # CSS: 96 px per inch, 72 pt per inch


@pytest.mark.parametrize("script", sorted(p.stem for p in FIGURES.glob("ch*.py")))
@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_labels_are_legible_at_the_drawn_size(script, language):
    module = load_file(FIGURES / f"{script}.py")
    with matplotlib.rc_context():                        # each script's draw(language) returns one figure
        fig = module.draw(language)
        labels = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        plt.close(fig)
    assert labels, f"{script}: no text found"
    small = [(round(t.get_fontsize() * PX_PER_PT, 1), t.get_text()[:30]) for t in labels
             if t.get_fontsize() * PX_PER_PT < SMALLEST_PX]
    assert not small, f"{script} ({language}): labels under {SMALLEST_PX} px at the drawn size: {small[:5]}"
