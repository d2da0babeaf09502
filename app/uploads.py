"""`python -m app.uploads list|usage|delete ID...`: the operator's view of stored uploads.

Reads the same settings as the server (DATA_DIR or DATABASE_URL, UPLOAD_QUOTA_MB), so it
sees exactly the store the app uses. A deleted upload answers 404 at once on every worker
and replica. Uploads are never deleted by the app itself.
"""
from __future__ import annotations

import argparse
import sys
import time

from app.domain.uploads import MB, UploadStore
from app.stores.uploads import StoreUnavailable
from app.web.settings import Settings


def _printable(text: str) -> str:
    # a file name is whatever the uploader sent: no terminal escapes reach the operator's screen
    return "".join(c if c.isprintable() else "?" for c in text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.uploads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every upload: id, bytes, uploaded at (UTC), first file name")
    sub.add_parser("usage", help="where uploads are stored, how many, bytes used of the quota")
    delete = sub.add_parser("delete", help="delete uploads by id (their links answer 404 from then on)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args, Settings())
    except (StoreUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace, settings: Settings) -> int:
    store = UploadStore.open(settings.resolved_data_dir, settings.database_url,
                             quota_mb=settings.upload_quota_mb, cache_mb=0)
    try:
        if args.command == "list":
            for up in store.listing():
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(up.created))
                print(f"{up.id}  {up.size:>9}  {stamp}  {_printable(up.filename)}")
        elif args.command == "usage":
            uploads = store.listing()
            used = sum(up.size for up in uploads)
            quota = settings.upload_quota_mb * MB
            print(f"store: {store.backend.describe()}")
            print(f"uploads: {len(uploads)}")
            print(f"used: {used} bytes ({used / MB:.1f} MB) of {settings.upload_quota_mb} MB "
                  f"({100 * used / quota:.1f}%)")
        else:
            missing = [ident for ident in args.ids if not store.delete(ident)]
            for ident in args.ids:
                if ident not in missing:
                    print(f"deleted {ident}")
            for ident in missing:
                print(f"no upload {_printable(ident)!r}", file=sys.stderr)
            return 1 if missing else 0
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
