"""``python -m verification.mutation``: the mutation run (:mod:`verification.mutation.runner`)."""

from verification.mutation.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
