-- The data source of the Cube 1.7 API test.
CREATE TABLE IF NOT EXISTS public.orders (
  id integer PRIMARY KEY,
  status text NOT NULL,
  amount integer NOT NULL,
  created_at timestamp NOT NULL
);
INSERT INTO public.orders (id, status, amount, created_at) VALUES
  (1, 'new', 10, '2026-01-01 09:15:00'),
  (2, 'new', 20, '2026-01-02 10:30:00'),
  (3, 'shipped', 30, '2026-01-02 18:45:00')
ON CONFLICT (id) DO NOTHING;
