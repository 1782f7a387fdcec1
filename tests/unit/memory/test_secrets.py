from memory.secrets import find_secrets


def test_x() -> None:
    assert find_secrets("") == []
