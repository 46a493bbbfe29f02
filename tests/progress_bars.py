"""Progress bars recorded, for the tests of the code that shows them (test_ngram, test_corpus, test_trainer)."""


def recorded_bars(monkeypatch) -> list[dict]:
    """Every tqdm bar the code makes from now on, drawn at once (no delay) into a string, not the
    terminal: its name, whether it was shown, how far it got of its total (read when it closes)."""
    import io

    import tqdm.auto

    bars, Bar = [], tqdm.auto.tqdm

    class Recorded(Bar):
        def __init__(self, *args, **kwargs):
            self.recorded = None
            super().__init__(*args, **{**kwargs, "delay": 0, "file": io.StringIO()})
            self.name = kwargs.get("desc")

        def close(self):
            if self.recorded is None:
                self.recorded = {"desc": self.name, "shown": not self.disable, "n": self.n, "total": self.total}
                bars.append(self.recorded)
            super().close()

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    return bars
