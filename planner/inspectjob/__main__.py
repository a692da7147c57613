from planner.inspectjob.run import main

if __name__ == "__main__":  # importing the package's modules (the isolation test) must not run the job
    raise SystemExit(main())
