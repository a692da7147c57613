"""`python -m planner.validation`: the corpus, case by case, and the error per figure."""

from planner.validation import case_table, error_table, leave_one_source_out, run_corpus


def main() -> None:
    results = run_corpus()
    print(case_table(results))
    print()
    print(error_table(results))
    print()
    print("Leave one source out (each source's cases without the reserves read off its own logs):")
    held = leave_one_source_out()
    print(error_table([result for one in held for result in one.results]))
    for one in held:
        if one.stand_ins:
            print(f"- {one.source}: {'; '.join(one.stand_ins)}")


if __name__ == "__main__":
    main()
