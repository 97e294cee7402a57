"""What runs inside an rq worker: dispatch and backstop jobs, the dispatch ledger, the
dispatcher contract, reconcile, and the supervision of the worker processes."""
