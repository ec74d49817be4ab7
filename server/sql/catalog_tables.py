"""The rows of ``pg_catalog`` and ``information_schema`` that describe cubequeue.

psql's ``\\d`` family and its tab completion read PostgreSQL's catalogs (PostgreSQL 15
docs, chapter 53 "System Catalogs", and chapter 37 "The Information Schema"). cubequeue has
no catalog of its own: it has the five ``system.*`` tables of
:mod:`cubequeue.storage.system_schemas`, so this module derives, from those column tuples
alone, the rows a PostgreSQL 15 server would hold for them (schema ``system``, one
``pg_class`` row per table, one ``pg_attribute`` row per column with its real type) plus
the fixed rows every client expects (``pg_catalog``, ``public``, the connected role and
database, the ``heap`` access method, the builtin types). The catalogs cubequeue has
nothing for (policies, publications, inheritance, statistics objects, …) exist with their
columns and no rows, so psql's queries over them run and answer "none".

Column types are PostgreSQL's; :mod:`.catalog` turns them into SQLite declarations (so
that ``c.oid = '16386'`` compares as a number, as PostgreSQL's ``oid`` input does) and
into result OIDs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from cubequeue.grammar.results import ColumnType
from cubequeue.server.pgtypes import oids
from cubequeue.storage.system_schemas import SYSTEM_TABLES

__all__ = [
    "CATALOG_SCHEMAS",
    "COLUMN_TYPES",
    "TABLES",
    "CatalogFacts",
    "TableDef",
    "catalog_rows",
]

#: PostgreSQL's fixed OIDs (``pg_namespace.dat``, ``pg_am.dat``, ``pg_authid.dat``)
PG_CATALOG_OID: Final = 11
PUBLIC_OID: Final = 2200
INFORMATION_SCHEMA_OID: Final = 13_000
HEAP_AM_OID: Final = 2
#: user objects start at FirstNormalObjectId (``transam.h``)
SYSTEM_SCHEMA_OID: Final = 16_384
ROLE_OID: Final = 10
DATABASE_OID: Final = 16_383
DEFAULT_COLLATION_OID: Final = 100
UTF8_ENCODING: Final = 6

#: the schemas a catalog query is about (the rest of a statement's tables are refused)
CATALOG_SCHEMAS: Final = frozenset({"pg_catalog", "information_schema"})


@dataclass(frozen=True, slots=True)
class TableDef:
    schema: str
    name: str
    #: (column, PostgreSQL type name) in the catalog's order
    columns: tuple[tuple[str, str], ...]


def _t(schema: str, name: str, spec: str) -> TableDef:
    cols = tuple((c.split(":")[0], c.split(":")[1]) for c in spec.split())
    return TableDef(schema, name, cols)


_PG = "pg_catalog"
_IS = "information_schema"

TABLES: Final[tuple[TableDef, ...]] = (
    _t(_PG, "pg_namespace", "oid:oid nspname:name nspowner:oid nspacl:text"),
    _t(_PG, "pg_class",
       "oid:oid relname:name relnamespace:oid reltype:oid reloftype:oid relowner:oid relam:oid "
       "relfilenode:oid reltablespace:oid relpages:int4 reltuples:float4 relallvisible:int4 "
       "reltoastrelid:oid relhasindex:bool relisshared:bool relpersistence:char relkind:char "
       "relnatts:int2 relchecks:int2 relhasrules:bool relhastriggers:bool relhassubclass:bool "
       "relrowsecurity:bool relforcerowsecurity:bool relispopulated:bool relreplident:char "
       "relispartition:bool relrewrite:oid relfrozenxid:int8 relminmxid:int8 relacl:text "
       "reloptions:text relpartbound:text"),
    _t(_PG, "pg_attribute",
       "attrelid:oid attname:name atttypid:oid attstattarget:int4 attlen:int2 attnum:int2 "
       "attndims:int4 attcacheoff:int4 atttypmod:int4 attbyval:bool attalign:char "
       "attstorage:char attcompression:char attnotnull:bool atthasdef:bool "
       "atthasmissing:bool attidentity:char attgenerated:char attisdropped:bool "
       "attislocal:bool attinhcount:int4 attcollation:oid attacl:text attoptions:text "
       "attfdwoptions:text"),
    _t(_PG, "pg_type",
       "oid:oid typname:name typnamespace:oid typowner:oid typlen:int2 typbyval:bool "
       "typtype:char typcategory:char typispreferred:bool typisdefined:bool typdelim:char "
       "typrelid:oid typsubscript:text typelem:oid typarray:oid typinput:text typoutput:text "
       "typreceive:text typsend:text typbasetype:oid typtypmod:int4 typndims:int4 "
       "typcollation:oid typnotnull:bool typdefault:text"),
    _t(_PG, "pg_database",
       "oid:oid datname:name datdba:oid encoding:int4 datlocprovider:char datistemplate:bool "
       "datallowconn:bool datconnlimit:int4 datcollate:text datctype:text daticulocale:text "
       "datcollversion:text datacl:text dattablespace:oid"),
    _t(_PG, "pg_roles",
       "oid:oid rolname:name rolsuper:bool rolinherit:bool rolcreaterole:bool "
       "rolcreatedb:bool rolcanlogin:bool rolreplication:bool rolconnlimit:int4 "
       "rolpassword:text rolvaliduntil:timestamptz rolbypassrls:bool rolconfig:text"),
    _t(_PG, "pg_user",
       "usename:name usesysid:oid usecreatedb:bool usesuper:bool userepl:bool "
       "usebypassrls:bool passwd:text valuntil:timestamptz useconfig:text"),
    _t(_PG, "pg_auth_members", "roleid:oid member:oid grantor:oid admin_option:bool"),
    _t(_PG, "pg_description", "objoid:oid classoid:oid objsubid:int4 description:text"),
    _t(_PG, "pg_shdescription", "objoid:oid classoid:oid description:text"),
    _t(_PG, "pg_attrdef", "oid:oid adrelid:oid adnum:int2 adbin:text"),
    _t(_PG, "pg_index",
       "indexrelid:oid indrelid:oid indnatts:int2 indnkeyatts:int2 indisunique:bool "
       "indnullsnotdistinct:bool indisprimary:bool indisexclusion:bool indimmediate:bool "
       "indisclustered:bool indisvalid:bool indcheckxmin:bool indisready:bool indislive:bool "
       "indisreplident:bool indkey:text indcollation:text indclass:text indoption:text "
       "indexprs:text indpred:text"),
    _t(_PG, "pg_constraint",
       "oid:oid conname:name connamespace:oid contype:char condeferrable:bool "
       "condeferred:bool convalidated:bool conrelid:oid contypid:oid conindid:oid "
       "conparentid:oid confrelid:oid conislocal:bool coninhcount:int4 connoinherit:bool "
       "conkey:text confkey:text conbin:text"),
    _t(_PG, "pg_inherits", "inhrelid:oid inhparent:oid inhseqno:int4 inhdetachpending:bool"),
    _t(_PG, "pg_am", "oid:oid amname:name amhandler:text amtype:char"),
    _t(_PG, "pg_collation",
       "oid:oid collname:name collnamespace:oid collowner:oid collprovider:char "
       "collisdeterministic:bool collencoding:int4 collcollate:text collctype:text "
       "colliculocale:text collversion:text"),
    _t(_PG, "pg_policy",
       "oid:oid polname:name polrelid:oid polcmd:char polpermissive:bool polroles:text "
       "polqual:text polwithcheck:text"),
    _t(_PG, "pg_statistic_ext",
       "oid:oid stxrelid:oid stxname:name stxnamespace:oid stxowner:oid stxstattarget:int4 "
       "stxkeys:text stxkind:text stxexprs:text"),
    _t(_PG, "pg_publication",
       "oid:oid pubname:name pubowner:oid puballtables:bool pubinsert:bool pubupdate:bool "
       "pubdelete:bool pubtruncate:bool pubviaroot:bool"),
    _t(_PG, "pg_publication_namespace", "oid:oid pnpubid:oid pnnspid:oid"),
    _t(_PG, "pg_publication_rel", "oid:oid prpubid:oid prrelid:oid prqual:text prattrs:text"),
    _t(_PG, "pg_proc",
       "oid:oid proname:name pronamespace:oid proowner:oid prolang:oid prokind:char "
       "prosecdef:bool proretset:bool provolatile:char pronargs:int2 prorettype:oid "
       "proargtypes:text"),
    _t(_PG, "pg_tablespace", "oid:oid spcname:name spcowner:oid spcacl:text spcoptions:text"),
    _t(_PG, "pg_extension",
       "oid:oid extname:name extowner:oid extnamespace:oid extrelocatable:bool "
       "extversion:text"),
    _t(_PG, "pg_trigger",
       "oid:oid tgrelid:oid tgparentid:oid tgname:name tgenabled:char tgisinternal:bool"),
    _t(_PG, "pg_rewrite", "oid:oid rulename:name ev_class:oid ev_type:char is_instead:bool"),
    _t(_PG, "pg_foreign_table", "ftrelid:oid ftserver:oid ftoptions:text"),
    _t(_PG, "pg_partitioned_table", "partrelid:oid partstrat:char partnatts:int2"),
    _t(_PG, "pg_sequence", "seqrelid:oid seqtypid:oid seqstart:int8 seqincrement:int8"),
    _t(_PG, "pg_enum", "oid:oid enumtypid:oid enumsortorder:float4 enumlabel:name"),
    _t(_PG, "pg_range", "rngtypid:oid rngsubtype:oid rngmultitypid:oid"),
    _t(_PG, "pg_tables",
       "schemaname:name tablename:name tableowner:name tablespace:name hasindexes:bool "
       "hasrules:bool hastriggers:bool rowsecurity:bool"),
    _t(_PG, "pg_views", "schemaname:name viewname:name viewowner:name definition:text"),
    _t(_PG, "pg_matviews",
       "schemaname:name matviewname:name matviewowner:name definition:text"),
    _t(_IS, "schemata",
       "catalog_name:text schema_name:text schema_owner:text default_character_set_catalog:text "
       "default_character_set_schema:text default_character_set_name:text sql_path:text"),
    _t(_IS, "tables",
       "table_catalog:text table_schema:text table_name:text table_type:text "
       "self_referencing_column_name:text reference_generation:text "
       "user_defined_type_catalog:text user_defined_type_schema:text "
       "user_defined_type_name:text is_insertable_into:text is_typed:text commit_action:text"),
    _t(_IS, "columns",
       "table_catalog:text table_schema:text table_name:text column_name:text "
       "ordinal_position:int4 column_default:text is_nullable:text data_type:text "
       "character_maximum_length:int4 numeric_precision:int4 datetime_precision:int4 "
       "udt_catalog:text udt_schema:text udt_name:text is_identity:text is_generated:text "
       "is_updatable:text"),
    _t(_IS, "views", "table_catalog:text table_schema:text table_name:text view_definition:text"),
)

#: column name → PostgreSQL type, over every catalog table (names are unique per type)
COLUMN_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {name: typ for table in TABLES for name, typ in reversed(table.columns)}
)


@dataclass(frozen=True, slots=True)
class _PgType:
    oid: int
    name: str
    length: int
    category: str
    array_oid: int
    sql_name: str  # format_type's spelling


#: the builtin types the system tables and the catalogs use (``pg_type.dat``)
_TYPES: Final = (
    _PgType(oids.BOOL, "bool", 1, "B", 1000, "boolean"),
    _PgType(18, "char", 1, "Z", 1002, '"char"'),
    _PgType(19, "name", 64, "S", 1003, "name"),
    _PgType(oids.INT8, "int8", 8, "N", 1016, "bigint"),
    _PgType(oids.INT2, "int2", 2, "N", 1005, "smallint"),
    _PgType(oids.INT4, "int4", 4, "N", 1007, "integer"),
    _PgType(oids.TEXT, "text", -1, "S", 1009, "text"),
    _PgType(26, "oid", 4, "N", 1028, "oid"),
    _PgType(oids.JSON, "json", -1, "U", 199, "json"),
    _PgType(700, "float4", 4, "N", 1021, "real"),
    _PgType(oids.FLOAT8, "float8", 8, "N", 1022, "double precision"),
    _PgType(oids.VARCHAR, "varchar", -1, "S", 1015, "character varying"),
    _PgType(oids.TIMESTAMPTZ, "timestamptz", 8, "D", 1185, "timestamp with time zone"),
    _PgType(oids.INTERVAL, "interval", 16, "T", 1187, "interval"),
    _PgType(oids.JSONB, "jsonb", -1, "U", 3807, "jsonb"),
)
#: OID → format_type's name (``format_type`` of the catalog functions)
TYPE_SQL_NAMES: Final[Mapping[int, str]] = MappingProxyType({t.oid: t.sql_name for t in _TYPES})
_TYPE_BY_NAME: Final = {t.name: t for t in _TYPES}
_COLUMN_PG_TYPE: Final = {
    ColumnType.STRING: "text",
    ColumnType.INT: "int8",
    ColumnType.BOOLEAN: "bool",
    ColumnType.TIMESTAMP: "timestamptz",
}
#: collatable types carry the default collation, as PostgreSQL's text does
_COLLATABLE: Final = frozenset({"text", "varchar", "name"})


@dataclass(frozen=True, slots=True)
class CatalogFacts:
    """What the rows depend on besides the system tables: who is asking, and where."""

    user: str
    database: str


def system_table_oid(index: int) -> int:
    """The ``pg_class.oid`` of the ``index``-th system table (in :data:`SYSTEM_TABLES`
    order); two OIDs apart, as PostgreSQL gives a table and its row type."""
    return SYSTEM_SCHEMA_OID + 1 + 2 * index


def catalog_rows(facts: CatalogFacts) -> dict[str, list[tuple[object, ...]]]:
    """Every catalog table's rows (``schema.table`` → rows, in column order)."""
    user, db = facts.user, facts.database
    rows: dict[str, list[tuple[object, ...]]] = {f"{t.schema}.{t.name}": [] for t in TABLES}

    def add(table: str, **values: object) -> None:
        (tdef,) = (t for t in TABLES if f"{t.schema}.{t.name}" == table)
        unknown = set(values) - {c for c, _ in tdef.columns}
        assert not unknown, f"{table} has no {unknown}"
        rows[table].append(tuple(values.get(c) for c, _ in tdef.columns))

    for oid, name, owner in (
        (PG_CATALOG_OID, "pg_catalog", user),
        (PUBLIC_OID, "public", "pg_database_owner"),
        (INFORMATION_SCHEMA_OID, "information_schema", user),
        (SYSTEM_SCHEMA_OID, "system", user),
    ):
        add("pg_catalog.pg_namespace", oid=oid, nspname=name,
            nspowner=ROLE_OID if owner == user else 6171)
        add("information_schema.schemata", catalog_name=db, schema_name=name, schema_owner=owner)
    add("pg_catalog.pg_roles", oid=ROLE_OID, rolname=user, rolsuper=True, rolinherit=True,
        rolcreaterole=True, rolcreatedb=True, rolcanlogin=True, rolreplication=True,
        rolconnlimit=-1, rolpassword="********", rolbypassrls=True)
    add("pg_catalog.pg_roles", oid=6171, rolname="pg_database_owner", rolsuper=False,
        rolinherit=True, rolcreaterole=False, rolcreatedb=False, rolcanlogin=False,
        rolreplication=False, rolconnlimit=-1, rolpassword="********", rolbypassrls=False)
    add("pg_catalog.pg_user", usename=user, usesysid=ROLE_OID, usecreatedb=True, usesuper=True,
        userepl=True, usebypassrls=True, passwd="********")
    add("pg_catalog.pg_database", oid=DATABASE_OID, datname=db, datdba=ROLE_OID,
        encoding=UTF8_ENCODING, datlocprovider="c", datistemplate=False, datallowconn=True,
        datconnlimit=-1, datcollate="C.UTF-8", datctype="C.UTF-8", dattablespace=1663)
    add("pg_catalog.pg_am", oid=HEAP_AM_OID, amname="heap", amhandler="heap_tableam_handler",
        amtype="t")
    add("pg_catalog.pg_collation", oid=DEFAULT_COLLATION_OID, collname="default",
        collnamespace=PG_CATALOG_OID, collowner=ROLE_OID, collprovider="d",
        collisdeterministic=True, collencoding=-1)
    add("pg_catalog.pg_tablespace", oid=1663, spcname="pg_default", spcowner=ROLE_OID)
    for t in _TYPES:
        add("pg_catalog.pg_type", oid=t.oid, typname=t.name, typnamespace=PG_CATALOG_OID,
            typowner=ROLE_OID, typlen=t.length, typbyval=0 < t.length <= 8, typtype="b",
            typcategory=t.category, typispreferred=False, typisdefined=True, typdelim=",",
            typrelid=0, typelem=0, typarray=t.array_oid, typbasetype=0, typtypmod=-1,
            typndims=0, typnotnull=False,
            typcollation=DEFAULT_COLLATION_OID if t.name in _COLLATABLE else 0)
    for index, (table, columns) in enumerate(SYSTEM_TABLES.items()):
        oid = system_table_oid(index)
        add("pg_catalog.pg_class", oid=oid, relname=table, relnamespace=SYSTEM_SCHEMA_OID,
            reltype=oid + 1, reloftype=0, relowner=ROLE_OID, relam=HEAP_AM_OID,
            relfilenode=oid, reltablespace=0, relpages=0, reltuples=-1.0, relallvisible=0,
            reltoastrelid=0, relhasindex=False, relisshared=False, relpersistence="p",
            relkind="r", relnatts=len(columns), relchecks=0, relhasrules=False,
            relhastriggers=False, relhassubclass=False, relrowsecurity=False,
            relforcerowsecurity=False, relispopulated=True, relreplident="d",
            relispartition=False, relrewrite=0, relfrozenxid=0, relminmxid=0)
        add("pg_catalog.pg_tables", schemaname="system", tablename=table, tableowner=user,
            hasindexes=False, hasrules=False, hastriggers=False, rowsecurity=False)
        add("information_schema.tables", table_catalog=db, table_schema="system",
            table_name=table, table_type="BASE TABLE", is_insertable_into="NO", is_typed="NO")
        for num, column in enumerate(columns, start=1):
            pg = _TYPE_BY_NAME[_COLUMN_PG_TYPE[column.type]]
            add("pg_catalog.pg_attribute", attrelid=oid, attname=column.name, atttypid=pg.oid,
                attstattarget=-1, attlen=pg.length, attnum=num, attndims=0, attcacheoff=-1,
                atttypmod=-1, attbyval=0 < pg.length <= 8, attalign="d" if pg.length == 8 else "i",
                attstorage="x" if pg.length < 0 else "p", attcompression="",
                attnotnull=False, atthasdef=False, atthasmissing=False, attidentity="",
                attgenerated="", attisdropped=False, attislocal=True, attinhcount=0,
                attcollation=DEFAULT_COLLATION_OID if pg.name in _COLLATABLE else 0)
            add("information_schema.columns", table_catalog=db, table_schema="system",
                table_name=table, column_name=column.name, ordinal_position=num,
                is_nullable="YES", data_type=pg.sql_name, udt_catalog=db,
                udt_schema="pg_catalog", udt_name=pg.name, is_identity="NO",
                is_generated="NEVER", is_updatable="NO")
    return rows


def relation_names() -> dict[int, tuple[str, str]]:
    """``pg_class.oid`` → (schema, name) of every relation the catalog lists."""
    return {system_table_oid(i): ("system", name) for i, name in enumerate(SYSTEM_TABLES)}
