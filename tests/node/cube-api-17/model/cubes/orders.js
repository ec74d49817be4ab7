// The one cube of the Cube 1.7 API test. A short refresh interval so that new rows show
// within seconds: Cube sends this key's SQL, `SELECT FLOOR((UNIX_TIMESTAMP()) / 2) as
// refresh_key`, to cubequeue (Cube Store's dialect), and a new key value makes Cube re-run
// the data query. `created_at` is the time dimension asked for with a granularity.
cube('orders', {
  sql: 'SELECT * FROM public.orders',

  refreshKey: {
    every: '2 second',
  },

  measures: {
    count: {
      type: 'count',
    },
    amount: {
      sql: 'amount',
      type: 'sum',
    },
  },

  dimensions: {
    id: {
      sql: 'id',
      type: 'number',
      primaryKey: true,
    },
    status: {
      sql: 'status',
      type: 'string',
    },
    created_at: {
      sql: 'created_at',
      type: 'time',
    },
  },
});
