"""Data from the Hugging Face Hub, with no network: each test builds a small dataset repository in the Hub's
layout on disk (Parquet shards written by ``datasets``, a README whose ``configs:`` map files to splits) and
loads it through the same code path a Hub id takes (``datasets.load_dataset``). conftest.py sets
HF_HUB_OFFLINE and a private HF_HOME for the whole session."""

import os
import subprocess
import sys
import textwrap

import datasets
import numpy as np
import pytest
from PIL import Image

from sweep.cli import main
from tests.helpers import TRAIN_STORIES, VAL_STORIES, write_text_layout
from workers.data import glue
from workers.data.base import DataNotFoundError
from workers.data.hub import HubSource, HubSplits
from workers.data.registry import data_spec
from workers.trial import run_trial

datasets.disable_progress_bars()
REVISION = "0b2714987fa478483af9968de7c934580d0bb9a2"  # a pinned commit, as a space would give


def write_hub_repo(root, configs: dict[str, dict[str, datasets.Dataset]]):
    """``configs``: {config: {split: Dataset}} written as ``<config>/<split>-00000-of-00001.parquet`` with the
    README front matter the Hub reads."""
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            (root / config).mkdir(parents=True, exist_ok=True)
            rows.to_parquet(str(root / config / f"{split}-00000-of-00001.parquet"))
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (root / "README.md").write_text("\n".join([*lines, "---", "# a test repository", ""]))
    return root


def text_repo(root, train=TRAIN_STORIES, val=VAL_STORIES):
    rows = {
        "train": datasets.Dataset.from_dict({"text": train}),
        "validation": datasets.Dataset.from_dict({"text": val}),
    }
    return write_hub_repo(root, {"default": rows})


def test_tinystories_from_the_hub_gives_the_windows_its_text_files_give(tmp_path, monkeypatch):
    """The same stories as the release's text files and as a Hub repository: same tokenizer, same windows."""
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    hub = data_spec(
        name="tinystories",
        seq_len=16,
        source="hub",
        hub={"repo": str(text_repo(tmp_path / "repo")), "revision": REVISION},
        text={"vocab_size": 300},
    )
    folder = data_spec(
        name="tinystories", seq_len=16, root=str(write_text_layout(tmp_path / "files")), text={"vocab_size": 300}
    )
    from_hub, from_files = hub.load_arrays(), folder.load_arrays()
    assert from_hub.ids_train.shape[0] > 50 and from_hub.ids_eval.shape[0] > 5
    assert np.array_equal(from_hub.ids_train, from_files.ids_train) and np.array_equal(
        from_hub.ids_eval, from_files.ids_eval
    )
    assert hub.data_identity() == f"hub:{(tmp_path / 'repo').resolve()}@{REVISION}"
    assert folder.data_identity().startswith(f"folder:{(tmp_path / 'files').resolve()}#")


def cifar_repo(root, train=12, test=5):
    rng = np.random.default_rng(0)
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)})
    pixels, splits = {}, {}
    for split, count in (("train", train), ("test", test)):
        pixels[split] = rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
        images = [Image.fromarray(image) for image in pixels[split]]
        rows = {"img": images, "label": [int(i) % 10 for i in range(count)]}
        splits[split] = datasets.Dataset.from_dict(rows, features=features)
    return write_hub_repo(root, {"plain_text": splits}), pixels


def test_cifar_from_the_hub_holds_the_repositorys_pixels_channels_first(tmp_path):
    repo, pixels = cifar_repo(tmp_path / "cifar")
    spec = data_spec(
        name="cifar10", source="hub", hub={"repo": str(repo), "config": "plain_text", "revision": REVISION}
    )
    arrays = spec.load_arrays()
    assert np.array_equal(arrays.x_train, pixels["train"].transpose(0, 3, 1, 2))
    assert np.array_equal(arrays.x_val, pixels["test"].transpose(0, 3, 1, 2))  # CIFAR's held-out split is test
    assert arrays.y_train.tolist() == [i % 10 for i in range(12)] and arrays.augment
    assert spec.data_identity() == f"hub:{repo.resolve()}/plain_text@{REVISION}"


def test_a_trial_records_where_its_data_came_from(tmp_path, tiny_vit_config):
    repo, _ = cifar_repo(tmp_path / "cifar", train=64, test=16)
    config = {
        **tiny_vit_config,
        "data": {
            "name": "cifar10",
            "source": "hub",
            "hub": {"repo": str(repo), "revision": REVISION, "config": "plain_text"},
        },
    }
    config["model"] = {**config["model"], "patch_size": 8}
    config["train"] = {**config["train"], "batch_size": 16, "max_steps": 2}
    record = run_trial(config)
    assert record["status"] == "ok", record.get("error")
    assert record["data_identity"] == f"hub:{repo.resolve()}/plain_text@{REVISION}"
    assert run_trial(tiny_vit_config)["data_identity"] == "embedded:scikit-learn digits"


GLUE_ROWS = {  # task: {split: (text_a, text_b, label names or scores)}, the same rows as TSV files and on the Hub
    "mnli": {
        "train": (
            ["The rights are nice.", "You know it."],
            ["Everyone likes them.", "You do not."],
            ["neutral", "contradiction"],
        ),
        "validation_matched": (["Matched premise."], ["Matched hypothesis."], ["entailment"]),
        "validation_mismatched": (
            ["Mismatched.", "Second."],
            ["Hypothesis.", "Another."],
            ["contradiction", "neutral"],
        ),
    },
    "rte": {
        "train": (["No weapons found."], ["Weapons found."], ["not_entailment"]),
        "validation": (["It rained."], ["It was wet."], ["entailment"]),
    },
    "stsb": {
        "train": (["A man is dancing."], ["A man dances."], [4.75]),
        "validation": (["A child rides."], ["A dog barks."], [0.25]),
    },
}
HUB_LABEL_NAMES = {"mnli": ["entailment", "neutral", "contradiction"], "rte": ["entailment", "not_entailment"]}


def glue_hub_repo(root):
    configs = {}
    for task, splits in GLUE_ROWS.items():
        column_a, column_b = glue.HUB_TASKS[task][2]
        names = HUB_LABEL_NAMES.get(task)
        label = datasets.ClassLabel(names=names) if names else datasets.Value("float32")
        features = datasets.Features(
            {column_a: datasets.Value("string"), column_b: datasets.Value("string"), "label": label}
        )
        configs[task] = {
            split: datasets.Dataset.from_dict(
                {column_a: a, column_b: b, "label": [names.index(x) for x in labels] if names else labels},
                features=features,
            )
            for split, (a, b, labels) in splits.items()
        }
    return write_hub_repo(root, configs)


def glue_tsv_root(root):
    """The same rows in the download script's layout, read by the file reader (headers name the columns)."""
    files = {
        "MNLI/train.tsv": ("mnli", "train"),
        "MNLI/dev_matched.tsv": ("mnli", "validation_matched"),
        "MNLI/dev_mismatched.tsv": ("mnli", "validation_mismatched"),
        "RTE/train.tsv": ("rte", "train"),
        "RTE/dev.tsv": ("rte", "validation"),
        "STS-B/train.tsv": ("stsb", "train"),
        "STS-B/dev.tsv": ("stsb", "validation"),
    }
    for relative, (task, split) in files.items():
        a, b, labels = GLUE_ROWS[task][split]
        label = "gold_label" if task == "mnli" else ("score" if task == "stsb" else "label")
        lines = [f"index\tsentence1\tsentence2\t{label}"] + [
            f"{i}\t{x}\t{y}\t{z}" for i, (x, y, z) in enumerate(zip(a, b, labels, strict=True))
        ]
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("task", ["mnli", "mnli_mm", "rte", "stsb"])
@pytest.mark.parametrize("split", ["train", "dev"])
def test_glue_from_the_hub_reads_as_its_tsv_files_do(tmp_path, task, split):
    """MNLI's class ids differ between the Hub (entailment, neutral, contradiction) and the files' reader
    (contradiction, entailment, neutral): the two must still give the same labels, by name."""
    hub = HubSplits(str(glue_hub_repo(tmp_path / "hub")), HubSource(revision=REVISION), "glue")
    from_hub = glue.read_hub_split(hub, task, split)
    from_files = glue.read_glue_split(glue_tsv_root(tmp_path / "glue_data"), task, split)
    assert from_hub.text_a == from_files.text_a and from_hub.text_b == from_files.text_b
    assert np.allclose(from_hub.labels, from_files.labels) and from_hub.labels.dtype == from_files.labels.dtype


def test_crammed_bert_data_with_glue_from_the_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    repo = glue_hub_repo(tmp_path / "hub")
    spec = data_spec(
        name="mlm_corpus",
        seq_len=16,
        corpus={"source": "generated", "generated_sentences": 300, "vocab_size": 120},
        glue={"hub": {"repo": str(repo), "revision": REVISION}, "tasks": ["rte", "mnli", "mnli_mm"]},
    )
    splits = spec.load_arrays()
    assert list(splits.glue) == ["rte", "mnli", "mnli_mm"]
    assert splits.glue["mnli_mm"].labels_dev.tolist() == [0, 2]  # contradiction, neutral in the files' order
    assert spec.data_identity() == f"corpus generated:mlm_corpus; glue hub:{repo.resolve()}@{REVISION}"


def hub_space(tmp_path, repo: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            question: fetch
            model: {{family: gpt2, embed_dim: 16, mlp_dim: 32}}
            axes: {{depth: [1], num_heads: [2]}}
            baseline: {{depth: 1, num_heads: 2}}
            metric: {{name: val_loss, tolerance: 0.1}}
            data:
              {{name: tinystories, seq_len: 8, source: hub, hub: {{repo: {repo}, revision: {REVISION}}},
               text: {{vocab_size: 300}}}}
            """
        )
    )
    return str(path)


def test_sweep_data_fetch_prints_rows_bytes_and_where(tmp_path, capsys):
    repo = text_repo(tmp_path / "repo")
    assert main(["data", "fetch", hub_space(tmp_path, str(repo))]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["tinystories train", "tinystories val"]
    assert f"{len(TRAIN_STORIES):,} rows" in lines[0] and f"{len(VAL_STORIES):,} rows" in lines[1]
    assert all(" bytes in " + os.environ["HF_HOME"] in line and f"@{REVISION})" in line for line in lines)
    assert main(["data", "fetch", "local_digits"]) == 0
    assert capsys.readouterr().out.strip() == "digits: nothing to fetch (generated here)"


@pytest.mark.slow
def test_offline_and_not_cached_is_one_line_naming_the_fetch_command(tmp_path):
    """A Hub id never fetched, with HF_HUB_OFFLINE set (by conftest, inherited): exit 2 at once, no traceback."""
    space = hub_space(tmp_path, "roneneldan/TinyStories")
    done = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "data", "fetch", space],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "roneneldan/TinyStories@" in error[0] and "run `sweep data fetch SPACE`" in error[0]


def test_a_gated_repository_names_the_token_and_the_login(monkeypatch):
    import httpx2  # huggingface_hub's HTTP client: its errors carry a response
    from huggingface_hub.errors import GatedRepoError

    def refuse(*args, **kwargs):
        response = httpx2.Response(
            403, request=httpx2.Request("GET", "https://huggingface.co/datasets/ILSVRC/imagenet-1k")
        )
        raise GatedRepoError("403 Client Error: access to ILSVRC/imagenet-1k is restricted", response=response)

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    spec = data_spec(name="cifar10", source="hub", hub={"repo": "ILSVRC/imagenet-1k", "revision": REVISION})
    with pytest.raises(DataNotFoundError, match=r"gated and access was refused.*huggingface-cli login.*HF_TOKEN"):
        spec.load_arrays()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "tinystories", "seq_len": 8, "source": "hub"}, "source: hub needs data.hub with a pinned revision"),
        ({"name": "tinystories", "seq_len": 8, "hub": {"revision": "x"}}, "data.hub is read with source: hub only"),
        ({"name": "cifar10", "source": "hub", "hub": {}}, "revision"),
        ({"name": "mlm_corpus", "seq_len": 8, "corpus": {"source": "hub", "hub": {"revision": "x"}}}, "hub.repo"),
    ],
)
def test_hub_settings_are_checked(data, message):
    with pytest.raises(ValueError, match=message):
        data_spec(**data)


def imagenet_repo(root):
    """An ImageNet-like repository: an ``image`` column of 40×48 RGB images, a ``label`` ClassLabel."""
    rng = np.random.default_rng(1)
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog", "owl"])})
    splits = {}
    for split, count in (("train", 9), ("validation", 6)):
        images = [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(count)]
        splits[split] = datasets.Dataset.from_dict(
            {"image": images, "label": [i % 3 for i in range(count)]}, features=features
        )
    return write_hub_repo(root, {"default": splits})


def test_class_images_from_the_hub_batch_as_class_folders_do(tmp_path):
    import torch

    from workers.data.imagefolder import FolderBatches

    repo = imagenet_repo(tmp_path / "imagenet")
    spec = data_spec(
        name="imagefolder", source="hub", hub={"repo": str(repo), "revision": REVISION}, img_size=32, num_workers=0
    )
    batches = FolderBatches(spec, torch.device("cpu"))
    assert batches.meta.num_classes == 3 and batches.meta.train_size == 9 and batches.meta.val_size == 6
    images, labels = next(batches.train_batches(3, torch.Generator().manual_seed(0)))
    assert images.shape == (3, 3, 32, 32) and set(labels.tolist()) <= {0, 1, 2}
    assert [labels.tolist() for _, labels in batches.val_batches(4)] == [[0, 1, 2, 0], [1, 2]]
    assert spec.data_identity() == f"hub:{repo.resolve()}@{REVISION}" and spec.require_local() is None


def revision_not_found(repo: str, revision: str):
    """The exception huggingface_hub raises when a repository exists and the revision does not (HTTP 404 with
    the Hub's RevisionNotFound error code)."""
    import httpx2
    from huggingface_hub.errors import RevisionNotFoundError

    url = f"https://huggingface.co/datasets/{repo}/resolve/{revision}/README.md"
    response = httpx2.Response(404, request=httpx2.Request("HEAD", url))
    return RevisionNotFoundError(f"404 Client Error. Revision Not Found for url: {url}.", response=response)


class HubWithoutThatRevision:
    """Stands in for huggingface_hub's HfApi inside ``datasets.load``: every request at a revision fails as the
    Hub fails for a revision the repository does not have; the rest of datasets' code path runs as it is."""

    def __init__(self, *args, **kwargs):
        pass

    def hf_hub_download(self, repo_id, filename, repo_type=None, revision=None, **kwargs):
        raise revision_not_found(repo_id, revision)

    def dataset_info(self, repo_id, revision=None, **kwargs):
        raise revision_not_found(repo_id, revision)


def test_a_revision_the_repository_does_not_have_is_one_line_naming_both(monkeypatch):
    """datasets rewords the Hub's RevisionNotFoundError as a DatasetNotFoundError and drops its cause; the line
    still says the revision does not exist, in which repository, and where to find its commits."""
    import datasets.load

    wrong = "0" * 40
    monkeypatch.setattr(datasets.load, "_raise_if_offline_mode_is_enabled", lambda *args, **kwargs: None)
    monkeypatch.setattr(datasets.load, "HfApi", HubWithoutThatRevision)
    spec = data_spec(name="cifar10", source="hub", hub={"repo": "uoft-cs/cifar10", "revision": wrong})
    with pytest.raises(DataNotFoundError) as caught:
        spec.load_arrays()
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"cifar10: revision {wrong} does not exist in uoft-cs/cifar10 on the Hub (split 'train'): pin a commit "
        "sha or tag of that repository (its history: https://huggingface.co/datasets/uoft-cs/cifar10/commits)"
    )


def test_a_tokenizer_at_a_revision_its_repository_lacks_is_one_line(monkeypatch):
    import huggingface_hub

    from workers.data.hub import HubFile, hub_file

    wrong = "f" * 40

    def refuse(repo_id, filename, revision=None, **kwargs):
        raise revision_not_found(repo_id, revision)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    with pytest.raises(DataNotFoundError) as caught:
        hub_file(HubFile(repo="openai-community/gpt2", revision=wrong), "tinystories", download=True)
    assert str(caught.value) == (
        f"tinystories: revision {wrong} does not exist in openai-community/gpt2 on the Hub (tokenizer.json): pin a "
        "commit sha or tag of that repository (its history: https://huggingface.co/openai-community/gpt2/commits)"
    )


def test_a_hub_tokenizer_is_read_from_the_cache_and_planning_never_downloads(tmp_path, monkeypatch):
    """Planning takes the stated size (the tokenizer is not cached: conftest's HF_HOME is empty and offline); a
    trial reads the file hf_hub_download gives, and its size is the tokenizer's own."""
    import huggingface_hub
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from workers.data.tinystories import load_tinystories_streams

    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    vocab = {"<|endoftext|>": 0, **{chr(97 + i): i + 1 for i in range(26)}, "[UNK]": 27, " ": 28}
    characters = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    characters.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")  # one token per character
    characters.save(str(tmp_path / "tokenizer.json"))
    asked = []
    monkeypatch.setattr(
        huggingface_hub,
        "hf_hub_download",
        lambda *args, **kwargs: asked.append(args) or str(tmp_path / "tokenizer.json"),
    )
    text = {"tokenizer_hub": {"repo": "openai-community/gpt2", "revision": "a" * 40}, "expected_vocab_size": 29}
    spec = data_spec(
        name="tinystories",
        seq_len=4,
        source="hub",
        hub={"repo": str(text_repo(tmp_path / "repo")), "revision": REVISION},
        text=text,
    )
    assert spec.vocab_size() == 29 and asked == []  # the stated size: nothing fetched to plan
    streams, description, vocab_size = load_tinystories_streams(spec.text_source(), spec.text_options)
    assert asked == [("openai-community/gpt2", "tokenizer.json")] and vocab_size == 29
    assert description.endswith(str(tmp_path / "tokenizer.json"))
    first_story = VAL_STORIES[0].strip()
    expected = [vocab.get(c, 27) for c in first_story]
    assert streams["val"][: len(expected)].tolist() == expected  # characters, not a tokenizer trained here


PAPER_PROFILES = {  # space/profile: {where in data: (repository, config)}
    "gpt2_tinystories/paper": {
        "hub": ("roneneldan/TinyStories", None),
        "text.tokenizer_hub": ("openai-community/gpt2", None),
    },
    "gpt2_tinystories/width": {
        "hub": ("roneneldan/TinyStories", None),
        "text.tokenizer_hub": ("openai-community/gpt2", None),
    },
    "gpt2_tinystories/breaks": {
        "hub": ("roneneldan/TinyStories", None),
        "text.tokenizer_hub": ("openai-community/gpt2", None),
    },
    "crammed_bert/paper": {"glue.hub": ("nyu-mll/glue", None)},
    "crammed_bert/breaks": {"glue.hub": ("nyu-mll/glue", None)},
    "c3_conditioning/gpu": {"hub": ("uoft-cs/cifar10", "plain_text")},
}


@pytest.mark.parametrize("key", sorted(PAPER_PROFILES))
def test_each_paper_profile_reads_the_hub_at_a_pinned_commit(key):
    from sweep.space.loader import load_space

    name, profile = key.split("/")
    data = load_space(name, profile)[1].data.model_dump()
    for where, (repo, config) in PAPER_PROFILES[key].items():
        block = data
        for part in where.split("."):
            block = block[part]
        assert block["repo"] == repo and block.get("config") == config
        assert len(block["revision"]) == 40 and int(block["revision"], 16) >= 0  # a commit sha, not a branch
    if "hub" in PAPER_PROFILES[key]:
        assert data["source"] == "hub"


@pytest.mark.parametrize(
    "key", ["gpt2_tinystories/smoke", "crammed_bert/smoke", "c3_conditioning/smoke", "c3_conditioning/cpu"]
)
def test_the_smoke_and_cpu_profiles_read_nothing_from_the_hub(key):
    from sweep.space.loader import load_space

    data = load_space(*key.split("/"))[1].data.model_dump()
    assert data.get("source", "folder") != "hub" and data.get("hub") is None
    assert (data.get("glue") or {}).get("hub") is None


def test_the_hub_is_reachable_only_where_a_server_listens(monkeypatch):
    """hub_reachable opens a TCP connection to HF_ENDPOINT's host and port: True with a listener there, False
    at once where nothing listens (a machine with no network), where datasets would retry for ~25 s."""
    import socket
    import time

    from workers.data.hub import hub_reachable

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        assert hub_reachable()
    started = time.perf_counter()
    assert not hub_reachable()  # the listener is closed: connection refused
    assert time.perf_counter() - started < 1.0
