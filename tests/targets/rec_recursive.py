"""A stack that changes faster than it can be read: a recursion to a random depth (1 to 20
calls of descend) from one loop, for ever, on the main thread. The deepest possible stack is
<module>, main, and 20 descend frames: 22. Prints "ready" once it runs.
"""

import random


def descend(depth):
    if depth > 1:
        return descend(depth - 1) + 1
    return 0


def main():
    pick = random.Random(7).randint
    print("ready", flush=True)
    while True:
        descend(pick(1, 20))


if __name__ == "__main__":
    main()
