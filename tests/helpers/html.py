"""What an HTML string holds as a browser tokenizer sees it: its start tags with their
attributes, and its text (entities decoded). Shared by the tests of the HTML views."""
from __future__ import annotations

from html.parser import HTMLParser


class Tags(HTMLParser):
    """Every start tag and attribute an HTML string holds, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Tags:
    parser = Tags()
    parser.feed(html)
    parser.close()
    return parser
