def export(*a, **k):
    raise NotImplementedError
