"""`python -m planner.validation`: the corpus, case by case, and the error per figure."""

from planner.validation import case_table, error_table, run_corpus


def main() -> None:
    results = run_corpus()
    print(case_table(results))
    print()
    print(error_table(results))


if __name__ == "__main__":
    main()
