import pytest

from batchsched.objects.quantity import (
    QuantityError,
    format_amount,
    parse_quantity,
    resource_amount,
)


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "100m", 100),
        ("cpu", "2", 2000),
        ("cpu", "1.5", 1500),
        ("cpu", "0.1", 100),
        ("cpu", "1e3", 1_000_000),
        ("cpu", "1u", 1),  # rounded up to the millicore
        ("memory", "4Gi", 4 * 2**30),
        ("memory", "500M", 500_000_000),
        ("memory", "12k", 12_000),
        ("memory", "1.5Ki", 1536),
        ("memory", "1e3", 1000),
        ("memory", "0.5", 1),  # rounded up to the byte
        ("nvidia.com/gpu", "8", 8),
        ("pods", 110, 110),
        ("cpu", 0.25, 250),
    ],
)
def test_resource_amount(resource: str, text: object, expected: int) -> None:
    assert resource_amount(resource, text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "4GB", "--1", "1 Gi", "Gi", "nan"])
def test_malformed_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity(text)


def test_negative_amounts_are_rejected() -> None:
    with pytest.raises(QuantityError, match="negative"):
        resource_amount("cpu", "-1")


def test_format_amount_is_readable() -> None:
    assert format_amount("cpu", 1500) == "1500m"
    assert format_amount("cpu", 2000) == "2"
    assert format_amount("memory", 4 * 2**30) == "4Gi"
    assert format_amount("nvidia.com/gpu", 3) == "3"
