-- The data source of the Cube API test and of docker-compose.yml's example.
CREATE TABLE IF NOT EXISTS public.orders (
  id integer PRIMARY KEY,
  status text NOT NULL,
  amount integer NOT NULL
);
INSERT INTO public.orders (id, status, amount) VALUES
  (1, 'new', 10), (2, 'new', 20), (3, 'shipped', 30)
ON CONFLICT (id) DO NOTHING;
