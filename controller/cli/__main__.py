"""``python -m pacekeeper.controller.cli`` runs the ``pacekeeper`` command."""

from pacekeeper.controller.cli.app import main

main()
