from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, manifest
from ...registry import registry


class Command(BaseCommand):
    help = (
        "Write the Job Manifest (wire names, queues, handlers) or, with --check, compare it to the registry."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--path", help="Manifest file (default: BACKWAVE['MANIFEST_PATH'], else ./backwave_manifest.txt)."
        )
        parser.add_argument(
            "--check", action="store_true", help="Exit 1, listing differences, if the file is out of date."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"] or conf.get().manifest_path or "backwave_manifest.txt")
        if options["check"]:
            found = manifest.differences(registry, path)
            if found:
                raise CommandError(
                    f"The Job Manifest {path} disagrees with the registry:\n" + "\n".join(found)
                )
            self.stdout.write(f"{path} matches the {len(registry.all())} registered jobs.")
            return
        path.write_text(manifest.render(registry), encoding="utf-8")
        self.stdout.write(f"Wrote {len(registry.all())} jobs to {path}.")
