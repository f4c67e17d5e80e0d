"""profiles"""

__all__: list[str] = []
