"""Documents of a text data set (workers/data/text/documents.py): text files split on a separator."""

from workers.data import tinystories


def test_text_file_stories_are_split_on_the_separator(tmp_path):
    path = tmp_path / "TinyStories-valid.txt"
    path.write_text("One day.\n\nThe end.\n<|endoftext|>\n  Second.<|endoftext|>\n<|endoftext|>\nThird\n", "utf-8")
    assert list(tinystories.TEXT_FILES.read(path)) == ["One day.\n\nThe end.", "Second.", "Third"]
