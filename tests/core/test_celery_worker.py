import os

import pytest

from governance.core.tasks import ping


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_task_runs_in_a_real_worker_process(celery_worker) -> None:
    result = ping.apply_async(args=["hello"], queue=celery_worker.queue).get(timeout=60)
    assert result["echo"] == "hello"
    assert result["worker_pid"] == str(celery_worker.process.pid)
    assert result["worker_pid"] != str(os.getpid())
